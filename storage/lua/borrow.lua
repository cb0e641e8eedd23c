-- borrow: take one host for ONE request outside its visit state — a robots.txt redirect to another
-- authority (RFC 9309 §2.3.1.2) — under acquire's rules: the host is not busy and its next fetch
-- is due, and so is its IP, unless the IP is the one the caller already holds busy through the
-- host it acquired (two names on one address: the commonest robots redirect). The host (and IP)
-- are busy until release.lua, which also moves their next-fetch times; the host need not be
-- known to the workbench (it may not be crawled at all, or belong to another agent).
-- The host is noted in P borrowed (host -> the borrowing view V), so that recover_view frees it if
-- the borrowing fetcher dies with the request in flight.
-- ARGV: prefix P, host, ip, held ip, now, view V.  Returns "-1" when taken, else when to try again
-- (never taken by a fenced view: fence.lua).
local P, host, ip, held = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local now = tonumber(ARGV[5])
local V = ARGV[6]
if redis.call('EXISTS', V .. 'fenced') == 1 then return tostring(now + 1) end  -- fence.lua
if redis.call('HEXISTS', P .. 'hbusy', host) == 1 then
  return tostring(now + 0.05)
end
local hn = tonumber(redis.call('HGET', P .. 'hnext', host) or '0')
local wait = hn
if ip ~= held then
  if redis.call('SISMEMBER', P .. 'ibusy', ip) == 1 then
    return tostring(math.max(hn, now + 0.05))
  end
  wait = math.max(wait, tonumber(redis.call('HGET', P .. 'inext', ip) or '0'))
end
if wait > now then
  return tostring(wait)
end
if ip ~= held then
  redis.call('SADD', P .. 'ibusy', ip)
end
redis.call('HSET', P .. 'hbusy', host, ip)
redis.call('HSET', P .. 'borrowed', host, V)
return '-1'
