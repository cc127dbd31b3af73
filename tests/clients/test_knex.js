// knex (the query builder over node pg) against a running saql server (port in SAQL_PORT):
// inserts, .limit()/.offset()/.first() (untyped `LIMIT $1`, which PostgreSQL infers as
// bigint), .where() with parameters, and transactions. Prints PASS/FAIL per check; exit
// status 1 on any failure.

const knex = require('knex');

const db = knex({
  client: 'pg',
  connection: { host: '127.0.0.1', port: Number(process.env.SAQL_PORT), user: 'saql', database: 'saql' },
  pool: { min: 0, max: 2 },
});
const failed = [];
let passed = 0;

function expect(cond, what) {
  if (!cond) throw new Error(what);
}

async function check(name, fn) {
  const start = Date.now();
  try {
    await fn();
    passed++;
    console.log(`PASS ${name} (${((Date.now() - start) / 1000).toFixed(1)}s)`);
  } catch (e) {
    failed.push(name);
    console.log(`FAIL ${name}: ${e.code || ''} ${e.message}`);
  }
}

const T0 = new Date(Date.UTC(2026, 11, 4, 9, 0, 0));

(async () => {
  await check('knex: insert rows, a multi-row insert', async () => {
    await db.raw("CREATE STREAM knex_events (ts TIMESTAMPTZ NOT NULL, host TEXT, amount BIGINT, " +
      "WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)");
    await db('knex_events').insert({ ts: T0, host: 'a', amount: 5 });
    await db('knex_events').insert([1, 2, 3, 4].map((i) => (
      { ts: new Date(T0.getTime() + i * 1000), host: `h${i}`, amount: i * 10 })));
    const [{ count }] = await db('knex_events').count('* as count');
    expect(Number(count) === 5, `count ${count}`);
  });

  await check('knex: .limit(), .offset(), .first(), .where() with parameters', async () => {
    const page = await db('knex_events').select('host', 'amount')
      .where('amount', '>', 5).orderBy('ts').limit(2).offset(1);
    expect(JSON.stringify(page.map((r) => r.host)) === '["h2","h3"]', JSON.stringify(page));
    const first = await db('knex_events').where({ host: 'h4' }).first();
    expect(first && Number(first.amount) === 40 && first.ts.getTime() === T0.getTime() + 4000,
      JSON.stringify(first));
    const none = await db('knex_events').where('host', 'nobody').first();
    expect(none === undefined, JSON.stringify(none));
    const inList = await db('knex_events').whereIn('host', ['a', 'h1']).orderBy('ts');
    expect(inList.length === 2, JSON.stringify(inList));
    const ranged = await db('knex_events').whereBetween('ts', [T0, new Date(T0.getTime() + 1500)]);
    expect(ranged.length === 2, JSON.stringify(ranged));
  });

  await check('knex: a transaction commits its inserts; errors carry SQLSTATE', async () => {
    await db.transaction(async (trx) => {
      await trx('knex_events').insert({ ts: new Date(T0.getTime() + 9000), host: 'trx', amount: 1 });
      const n = await trx('knex_events').where('host', 'trx').count('* as n').first();
      expect(Number(n.n) === 1, JSON.stringify(n));
    });
    const after = await db('knex_events').where('host', 'trx').first();
    expect(after && after.host === 'trx', JSON.stringify(after));
    try {
      await db('no_such_stream').first();
      throw new Error('no error');
    } catch (e) {
      expect(e.code === '42P01', `${e.code} ${e.message}`);
    }
  });

  await db.destroy();
  console.log(`\n${passed} passed, ${failed.length} failed`);
  for (const f of failed) console.log(`  failed: ${f}`);
  process.exit(failed.length ? 1 : 0);
})();
