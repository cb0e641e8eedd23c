-- recover_view: one agent's fetch actors died with requests in flight (the agent's surviving
-- fetchers were stopped and their results committed first, so every in-flight URL of hosts owned
-- by this view belongs to the dead ones). Put those URLs back at the front of their visit states,
-- free their hosts and IPs, and delay both a full delay from now (the requests may have reached the
-- servers; they ended at the latest when the processes died, before now). Hosts of the view still
-- busy with nothing in flight (committed, not yet released) are freed and delayed the same way.
-- ARGV: prefix P, view V, now, host_delay, ip_delay (delay_host_and_ip: _delay.lua).  Returns the number of URLs put back.
local P, V = ARGV[1], ARGV[2]
local now, host_delay, ip_delay = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local views = redis.call('SMEMBERS', P .. 'views')
local inflight = redis.call('HGETALL', P .. 'inflight')
local back = 0
local freed = {}
for i = 1, #inflight, 2 do
  local url, host = inflight[i], inflight[i + 1]
  if redis.call('HGET', P .. 'howner', host) == V then
    redis.call('LPUSH', P .. 'vs:' .. host, string.sub(url, #host + 2))
    redis.call('HDEL', P .. 'inflight', url)
    redis.call('SADD', V .. 'active', host)
    back = back + 1
    local ip = redis.call('HGET', P .. 'hbusy', host)
    if ip then
      redis.call('HDEL', P .. 'hbusy', host)
      redis.call('SREM', P .. 'ibusy', ip)
      freed[ip] = true
    end
    ip = redis.call('HGET', P .. 'hostip', host)
    delay_host_and_ip(P, host, ip, now, host_delay, ip_delay)
    redis.call('ZADD', V .. 'ent:' .. ip, tonumber(redis.call('HGET', P .. 'hnext', host)), host)
    freed[ip] = true
  end
end
redis.call('INCRBY', P .. 'queued', back)
-- hosts this view borrowed for a robots.txt redirect hop (borrow.lua): free and delay them too
local borrowed = redis.call('HGETALL', P .. 'borrowed')
for i = 1, #borrowed, 2 do
  local host = borrowed[i]
  if borrowed[i + 1] == V then
    redis.call('HDEL', P .. 'borrowed', host)
    local ip = redis.call('HGET', P .. 'hbusy', host)
    if ip then
      redis.call('HDEL', P .. 'hbusy', host)
      redis.call('SREM', P .. 'ibusy', ip)
      delay_host_and_ip(P, host, ip, now, host_delay, ip_delay)
      local owner = redis.call('HGET', P .. 'howner', host)
      if owner and redis.call('LLEN', P .. 'vs:' .. host) > 0 then
        redis.call('ZADD', owner .. 'ent:' .. ip, tonumber(redis.call('HGET', P .. 'hnext', host)), host)
      end
      freed[ip] = true
    end
  end
end
-- hosts of this view still marked busy with nothing in flight: a visit whose outcome the agent
-- committed (the commit drops the in-flight entry) but whose host the dead fetch actor had not yet
-- released (the fetch loop releases at its next round, apart from the commit). Nobody else would
-- ever free them, and their IP would stay busy for every agent (a crawl that never ended).
local busy = redis.call('HGETALL', P .. 'hbusy')
for i = 1, #busy, 2 do
  local host, ip = busy[i], busy[i + 1]
  local borrower = redis.call('HGET', P .. 'borrowed', host)
  if redis.call('HGET', P .. 'howner', host) == V and (not borrower or borrower == V) then
    redis.call('HDEL', P .. 'hbusy', host)
    redis.call('SREM', P .. 'ibusy', ip)
    delay_host_and_ip(P, host, ip, now, host_delay, ip_delay)
    if redis.call('LLEN', P .. 'vs:' .. host) > 0 then
      redis.call('SADD', V .. 'active', host)
      redis.call('ZADD', V .. 'ent:' .. ip, tonumber(redis.call('HGET', P .. 'hnext', host)), host)
    end
    freed[ip] = true
  end
end
for ip, _ in pairs(freed) do
  local ipn = tonumber(redis.call('HGET', P .. 'inext', ip) or '0')
  for _, v in ipairs(views) do
    local top = redis.call('ZRANGE', v .. 'ent:' .. ip, 0, 0, 'WITHSCORES')
    if #top > 0 then redis.call('ZADD', v .. 'wb', math.max(ipn, tonumber(top[2])), ip) end
  end
end
return back
