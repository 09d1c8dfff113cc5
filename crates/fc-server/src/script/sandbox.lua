-- The environment scripts run in, built once per interpreter (fast-cache's own code, run with
-- the interpreter's full globals before any script). Redis 7's rules: the globals and the
-- libraries are read-only, a missing global is an error, `os`, `io`, `debug`, `require`,
-- `dofile`, `loadfile`, `print`, `setfenv`, `getfenv`, `module` and `newproxy` are absent.
local libs, rcall, handler = ...
local G = _G
local error, rawget, rawset, setmetatable, pairs, next, xpcall, tostring, type =
    G.error, G.rawget, G.rawset, G.setmetatable, G.pairs, G.next, G.xpcall, G.tostring, G.type

local function readonly()
    error("Attempt to modify a readonly table", 2)
end

-- A read-only view of `t`: reads go to `t`, writes fail.
local function protect(t)
    return setmetatable({}, { __index = t, __newindex = readonly, __metatable = false })
end

-- What scripts see as globals, behind `env`.
local base = {}
for _, name in pairs({
    "assert", "collectgarbage", "error", "gcinfo", "getmetatable", "ipairs", "load",
    "loadstring", "next", "pairs", "pcall", "rawequal", "rawget", "rawset", "select",
    "setmetatable", "tonumber", "tostring", "type", "unpack", "xpcall", "_VERSION",
}) do
    base[name] = G[name]
end
for _, name in pairs({ "coroutine", "math", "string", "table" }) do
    base[name] = protect(G[name])
end
for name, lib in pairs(libs) do
    base[name] = protect(lib)
end

-- `redis.call` and `redis.pcall`: the Rust side answers `ok, value`; a failed call raises
-- the error table (`{err = ...}`) as Redis's does.
local redis = libs.redis
redis.call = function(...)
    local ok, value = rcall(...)
    if not ok then
        error(value, 0)
    end
    return value
end
redis.pcall = function(...)
    local _, value = rcall(...)
    return value
end
base.redis = protect(redis)

local env = setmetatable({}, { __index = base, __newindex = readonly, __metatable = false })
setmetatable(base, {
    __index = function(_, name)
        error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
    end,
    __metatable = false,
})
base._G = env

-- `handler` (Rust) notes the line of the innermost user code running when an error is
-- raised; the caller reads it.

-- Forgets whatever a script stored into the environment with `rawset`.
local function scrub()
    if next(env) ~= nil then
        for k in pairs(env) do
            rawset(env, k, nil)
        end
    end
end

-- Runs an `EVAL` body with `KEYS` and `ARGV` set: `ok, result`.
-- `KEYS` and `ARGV` from the arguments after `nkeys` (pushed straight onto the stack: cheaper
-- than building the tables from Rust).
local function split(nkeys, ...)
    local keys = { ... }
    local argv = {}
    for i = nkeys + 1, #keys do
        argv[i - nkeys] = keys[i]
        keys[i] = nil
    end
    return keys, argv
end

local function run_script(f, nkeys, ...)
    base.KEYS, base.ARGV = split(nkeys, ...)
    local ok, result = xpcall(f, handler)
    scrub()
    return ok, result
end

-- Runs a library function (`FCALL`) with its keys and arguments: `ok, result`.
local function run_function(f, nkeys, ...)
    local keys, argv = split(nkeys, ...)
    local ok, result = xpcall(function()
        return f(keys, argv)
    end, handler)
    scrub()
    return ok, result
end

-- Runs a library's code (`FUNCTION LOAD`): `ok, error`.
local function run_library(f)
    local ok, result = xpcall(f, handler)
    scrub()
    return ok, result
end

return env, run_script, run_function, run_library
