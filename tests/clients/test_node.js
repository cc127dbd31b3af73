// node-postgres against a running saql server (port in SAQL_PORT): `pg` (connect, version,
// DDL, a named prepared INSERT reused 12 times, timestamps, SQLSTATE), `pg-query-stream` over
// SUBSCRIBE (portal suspension: live rows in batches of a fetch size), `pg-copy-streams`
// (COPY FROM STDIN in csv, COPY (SUBSCRIBE ...) TO STDOUT). Prints PASS/FAIL per check; the
// exit status is the number of failures.
//
// Run by run.sh, which installs the packages (NODE_PATH) and starts the server.

process.env.TZ = "UTC";
const { Client } = require("pg");
const QueryStream = require("pg-query-stream");
const { from: copyFrom, to: copyTo } = require("pg-copy-streams");

const PORT = Number(process.env.SAQL_PORT);
const config = { host: "127.0.0.1", port: PORT, user: "saql", database: "saql" };
const failed = [];
let passed = 0;

function expect(cond, what) {
  if (!cond) throw new Error(`expected: ${what}`);
}

async function check(name, fn) {
  const start = Date.now();
  const client = new Client(config);
  try {
    await client.connect();
    await Promise.race([
      fn(client),
      new Promise((_, reject) => setTimeout(() => reject(new Error("timed out")), 60000)),
    ]);
    passed++;
    console.log(`PASS ${name} (${((Date.now() - start) / 1000).toFixed(1)}s)`);
  } catch (e) {
    failed.push(name);
    console.log(`FAIL ${name}: ${e.stack || e}`);
  } finally {
    await client.end().catch(() => {});
  }
}

const T0 = "2026-12-01 13:47:58.167865";

async function main() {
  await check("pg: connect, version, DDL, named prepared INSERT x12, timestamps", async (c) => {
    const v = (await c.query("SELECT version()")).rows[0].version;
    expect(v.startsWith("PostgreSQL 16.0 (saql "), v);
    await c.query(
      "CREATE STREAM node_events (ts TIMESTAMP NOT NULL, host TEXT, amount BIGINT, " +
        "WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)"
    );
    await c.query(
      "CREATE CONTINUOUS QUERY node_big AS SELECT ts, host, amount FROM node_events WHERE amount > 10"
    );
    for (let i = 0; i < 12; i++) {
      const r = await c.query({
        name: "node_insert",
        text: "INSERT INTO node_events (ts, host, amount) VALUES ($1, $2, $3)",
        values: [`2026-12-01 13:47:${String(58 - i).padStart(2, "0")}.167865`, `h${i}`, i * 5],
      });
      expect(r.rowCount === 1, `rowCount ${r.rowCount}`);
    }
    const n = (await c.query("SELECT count(*) AS n FROM node_events")).rows[0].n;
    expect(Number(n) === 12, `count ${n}`);
    // pg parses a timestamp into a Date (milliseconds, in the process's zone: UTC here).
    const ts = (await c.query("SELECT max(ts) AS t FROM node_events")).rows[0].t;
    expect(ts.getTime() === Date.UTC(2026, 11, 1, 13, 47, 58, 167), ts.toISOString());
    // As text the microseconds are there, in PostgreSQL's form.
    const text = (await c.query({ text: "SELECT max(ts) AS t FROM node_events", types: {
      getTypeParser: () => (value) => value } })).rows[0].t;
    expect(text === T0, text);
  });

  await check("pg: SQLSTATE on errors, the connection goes on", async (c) => {
    try {
      await c.query("SELECT * FROM no_such_stream");
      throw new Error("no error");
    } catch (e) {
      expect(e.code === "42P01", `code ${e.code}: ${e.message}`);
    }
    try {
      await c.query("INSERT INTO node_events VALUES ('not a time', 'x', 1)");
      throw new Error("no error");
    } catch (e) {
      expect(e.code === "22007", `code ${e.code}: ${e.message}`);
    }
    const one = (await c.query("SELECT 1 AS one")).rows[0].one;
    expect(Number(one) === 1, `after errors: ${one}`);
  });

  await check("pg-copy-streams: COPY FROM STDIN csv, then COPY (SUBSCRIBE ... WITH (SNAPSHOT)) TO STDOUT", async (c) => {
    const sink = c.query(copyFrom("COPY node_events (ts, host, amount) FROM STDIN WITH (FORMAT csv)"));
    await new Promise((resolve, reject) => {
      sink.on("error", reject);
      sink.on("finish", resolve);
      for (let i = 0; i < 5; i++) sink.write(`2026-12-01 13:48:0${i},copy${i},${100 + i}\n`);
      sink.end();
    });
    expect(sink.rowCount === 5, `COPY rowCount ${sink.rowCount}`);
    const out = c.query(
      copyTo("COPY (SUBSCRIBE node_big WITH (SNAPSHOT)) TO STDOUT WITH (FORMAT csv, HEADER)")
    );
    let text = "";
    await new Promise((resolve, reject) => {
      out.on("error", reject);
      out.on("data", (chunk) => {
        text += chunk.toString();
        if (text.includes("copy4")) resolve();
      });
    });
    const lines = text.trim().split("\n");
    expect(lines[0] === "ts,host,amount", lines[0]);
    expect(lines.some((l) => l.endsWith(",copy0,100")), text);
  });

  await check("pg-query-stream: SUBSCRIBE with a fetch size gets retained, then live rows", async (c) => {
    const other = new Client(config);
    await other.connect();
    try {
      const stream = c.query(new QueryStream("SUBSCRIBE node_big WITH (SNAPSHOT)", [], { batchSize: 1 }));
      const seen = [];
      await new Promise((resolve, reject) => {
        stream.on("error", reject);
        stream.on("data", (row) => {
          seen.push(row.host);
          if (seen.length === 1) {
            other
              .query("INSERT INTO node_events VALUES ('2026-12-01 13:49:00', 'live', 999)")
              .catch(reject);
          }
          if (row.host === "live") resolve();
        });
      });
      stream.destroy();
      expect(seen.includes("copy0") && seen[seen.length - 1] === "live", seen.join(","));
    } finally {
      await other.end();
    }
  });

  console.log(`\n${passed} passed, ${failed.length} failed`);
  for (const name of failed) console.log(`  failed: ${name}`);
  process.exit(Math.min(failed.length, 100));
}

main();
