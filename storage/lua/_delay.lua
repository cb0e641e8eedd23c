-- _delay: a fragment prepended to recover.lua and recover_view.lua by storage.redis_frontier.
-- After a crash a host and its IP wait a full delay from now: the host delay, or the host's capped
-- robots.txt Crawl-delay (P cdelay) if larger, and the IP delay. Next-fetch times only move forward.
local function push_back(hash, member, at)
  if tonumber(redis.call('HGET', hash, member) or '0') < at then
    redis.call('HSET', hash, member, at)
  end
end
local function delay_host_and_ip(P, host, ip, now, host_delay, ip_delay)
  push_back(P .. 'hnext', host, now + math.max(host_delay, tonumber(redis.call('HGET', P .. 'cdelay', host) or '0')))
  push_back(P .. 'inext', ip, now + ip_delay)
end
