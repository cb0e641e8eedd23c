-- acquire: take up to n ready hosts, one per IP workbench entry, and pop one path from each.
-- ARGV: prefix, now, n.  Returns {host1, ip1, path1, ..., earliest} where earliest is the
-- smallest score left in the workbench (-1 if none): when the caller may try again.
-- A taken host and its IP are marked busy (one request in flight per host and per IP) until
-- release.lua; the URL is recorded in the in-flight hash until the caller commits it.
local P = ARGV[1]
local now = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local out = {}
local taken = 0
local ips = redis.call('ZRANGEBYSCORE', P .. 'wb', '-inf', now, 'LIMIT', 0, n)
for _, ip in ipairs(ips) do
  redis.call('ZREM', P .. 'wb', ip)
  local ent = P .. 'ent:' .. ip
  local top = redis.call('ZRANGE', ent, 0, 0, 'WITHSCORES')
  if #top > 0 and tonumber(top[2]) <= now then
    local host = top[1]
    redis.call('ZREM', ent, host)
    local path = redis.call('LPOP', P .. 'vs:' .. host)
    if path then
      redis.call('SADD', P .. 'ibusy', ip)
      redis.call('HSET', P .. 'hbusy', host, ip)
      redis.call('HSET', P .. 'inflight', host .. path, host)
      redis.call('DECR', P .. 'queued')
      if redis.call('LLEN', P .. 'vs:' .. host) == 0 then redis.call('SREM', P .. 'active', host) end
      out[#out + 1] = host
      out[#out + 1] = ip
      out[#out + 1] = path
      taken = taken + 1
    end
    -- an empty visit state is never in an entry; if one slipped in, it is dropped here
    if not path and redis.call('ZCARD', ent) > 0 then
      local t = redis.call('ZRANGE', ent, 0, 0, 'WITHSCORES')
      local ipn = tonumber(redis.call('HGET', P .. 'inext', ip) or '0')
      redis.call('ZADD', P .. 'wb', math.max(ipn, tonumber(t[2])), ip)
    end
  elseif #top > 0 then
    -- stale score (should not happen): put the entry back at its true time
    local ipn = tonumber(redis.call('HGET', P .. 'inext', ip) or '0')
    redis.call('ZADD', P .. 'wb', math.max(ipn, tonumber(top[2])), ip)
  end
end
local first = redis.call('ZRANGE', P .. 'wb', 0, 0, 'WITHSCORES')
out[#out + 1] = (#first > 0) and first[2] or '-1'
return out
