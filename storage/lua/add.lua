-- add: append (or, with front=1, prepend in the given order) paths to visit states.
-- ARGV: prefix P, view V, front, then groups of
-- (host, ip, k, path_1..path_k).
-- A host gets its IP and its owner (the view of the agent that first adds it) on first add; a
-- host that is not busy and has URLs is put in its IP's entry of its owner's view, and an IP that
-- is not busy is (re)scored in that view's workbench.
local P, V = ARGV[1], ARGV[2]
local front = ARGV[3] == '1'
local i = 4
local added = 0
while i <= #ARGV do
  local host, ip, k = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  i = i + 3
  local key = P .. 'vs:' .. host
  if front then
    for j = i + k - 1, i, -1 do redis.call('LPUSH', key, ARGV[j]) end
  else
    for j = i, i + k - 1 do redis.call('RPUSH', key, ARGV[j]) end
  end
  i = i + k
  added = added + k
  redis.call('HSETNX', P .. 'hostip', host, ip)
  ip = redis.call('HGET', P .. 'hostip', host)
  redis.call('HSETNX', P .. 'howner', host, V)
  local hv = redis.call('HGET', P .. 'howner', host)
  if k > 0 then redis.call('SADD', hv .. 'active', host) end
  if redis.call('HEXISTS', P .. 'hbusy', host) == 0 and redis.call('LLEN', key) > 0 then
    local hn = tonumber(redis.call('HGET', P .. 'hnext', host) or '0')
    local ent = hv .. 'ent:' .. ip
    redis.call('ZADD', ent, hn, host)
    if redis.call('SISMEMBER', P .. 'ibusy', ip) == 0 then
      local top = redis.call('ZRANGE', ent, 0, 0, 'WITHSCORES')
      local ipn = tonumber(redis.call('HGET', P .. 'inext', ip) or '0')
      redis.call('ZADD', hv .. 'wb', math.max(ipn, tonumber(top[2])), ip)
    end
  end
end
redis.call('INCRBY', P .. 'queued', added)
return added
