-- commit: forget in-flight URLs whose results are stored and add to the crawl counters, once.
-- ARGV: prefix P, view V (or '': the driver), token, k, url_1..url_k, then pairs (counter, n).
-- A url_i is an in-flight key ("<host> <entry>") or, for a failure recorded (no space), a URL of
-- P failing: its record is stored, so it is failing no more.
-- The token makes a commit idempotent: a client that retries after its connection to Redis broke
-- (a Redis restart) cannot count a batch twice. Every applied commit bumps the activity counter
-- (termination detection: actors.agent.Agent._all_idle). Returns 1 if applied, 0 if a repeat, -1
-- if the view is fenced (fence.lua: its in-flight URLs were put back for others to fetch).
local P, V, token = ARGV[1], ARGV[2], ARGV[3]
if V ~= '' and redis.call('EXISTS', V .. 'fenced') == 1 then return -1 end
if not redis.call('SET', P .. 'commit:' .. token, '1', 'NX', 'EX', 600) then return 0 end
local k = tonumber(ARGV[4])
for i = 5, 4 + k do
  if string.find(ARGV[i], ' ', 1, true) then redis.call('HDEL', P .. 'inflight', ARGV[i])
  else redis.call('HDEL', P .. 'failing', ARGV[i]) end
end
for i = 5 + k, #ARGV, 2 do redis.call('HINCRBY', P .. 'stats', ARGV[i], ARGV[i + 1]) end
redis.call('INCR', P .. 'activity')
return 1
