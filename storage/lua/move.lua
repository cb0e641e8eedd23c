-- move: hand hosts to another agent's view (their shard changed owner: actors/membership.py).
-- ARGV: prefix P, then pairs (host, new view).  The visit state, hnext, hostip and the virtual
-- queue's offsets are global and stay; what moves is the host's owner, its place in the owner's
-- front (active), its workbench entry (with its score) and its virtualized-URL count. A host in
-- flight only changes owner: release.lua puts it in its new owner's entry. Every IP whose entries
-- changed is re-scored in every view, as release.lua does. Returns the number of hosts moved.
local P = ARGV[1]
local moved = 0
local touched = {}
for i = 2, #ARGV, 2 do
  local host, nv = ARGV[i], ARGV[i + 1]
  local ov = redis.call('HGET', P .. 'howner', host)
  if ov and ov ~= nv then
    redis.call('HSET', P .. 'howner', host, nv)
    if redis.call('SREM', ov .. 'active', host) == 1 then redis.call('SADD', nv .. 'active', host) end
    local ip = redis.call('HGET', P .. 'hostip', host)
    local score = redis.call('ZSCORE', ov .. 'ent:' .. ip, host)
    if score then
      redis.call('ZREM', ov .. 'ent:' .. ip, host)
      redis.call('ZADD', nv .. 'ent:' .. ip, score, host)
      touched[ip] = true
    end
    local v = redis.call('HGET', ov .. 'virt', host)
    if v then
      redis.call('HDEL', ov .. 'virt', host)
      redis.call('HINCRBY', nv .. 'virt', host, v)
    end
    moved = moved + 1
  end
end
local views = redis.call('SMEMBERS', P .. 'views')
for ip, _ in pairs(touched) do
  local ipn = tonumber(redis.call('HGET', P .. 'inext', ip) or '0')
  local busy = redis.call('SISMEMBER', P .. 'ibusy', ip) == 1
  for _, v in ipairs(views) do
    local top = redis.call('ZRANGE', v .. 'ent:' .. ip, 0, 0, 'WITHSCORES')
    if #top == 0 then
      redis.call('ZREM', v .. 'wb', ip)
    elseif not busy then
      redis.call('ZADD', v .. 'wb', math.max(ipn, tonumber(top[2])), ip)
    end
  end
end
return moved
