-- checkpoint: a shard's state is in the object store under the keys of MANIFEST (a JSON object,
-- store key -> bytes); it replaces the shard's last checkpoint, and the first LOGGED entries of its
-- log, which it holds, go (LOGGED -1: all). HOME (optional): the shard's new P shome value, set
-- with it (a put-away: "store FILES BYTES"). Refused (0) when view V is fenced: a holder that
-- outlived its death must not point the shard at files its successor never read, nor let the
-- uploads it made meanwhile be deleted as superseded. ARGV: prefix P, view V, shard, manifest,
-- logged, home, the shard's log key. Returns 1 when written.
local P, V, shard, manifest, logged, home, slog = ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5]), ARGV[6], ARGV[7]
if redis.call('EXISTS', V .. 'fenced') == 1 then return 0 end
redis.call('HSET', P .. 'sckpt', shard, manifest)
if logged < 0 then
  redis.call('DEL', slog)
else
  redis.call('LTRIM', slog, logged, -1)
end
if home ~= nil and home ~= '' then redis.call('HSET', P .. 'shome', shard, home) end
return 1
