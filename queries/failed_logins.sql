-- Brute-force logins: an account that fails to log in 10 or more times on one host
-- within a minute.
CREATE CONTINUOUS QUERY failed_logins AS
SELECT host, user_name, window_end, COUNT(*) AS failures
FROM TUMBLE(proc_events, ts, INTERVAL '1' MINUTE)
WHERE op = 'login_failed'
GROUP BY host, user_name, window_start, window_end
HAVING COUNT(*) >= 10;
