-- Fixture for tests/cli.rs: a second query over the stream of logins.sql.
CREATE CONTINUOUS QUERY denied AS
SELECT ts, host, user_name FROM logins WHERE NOT ok AND host = 'db';
