-- The environment scripts run in, built once per interpreter (fast-cache's own code, run with
-- the interpreter's full globals before any script). Redis 7's rules: the globals and the
-- libraries are read-only, a missing global is an error, `os`, `io`, `debug`, `require`,
-- `dofile`, `loadfile`, `print`, `setfenv`, `getfenv`, `module` and `newproxy` are absent.
local libs, rcall, handler, direct = ...
local G = _G
local error, rawget, rawset, setmetatable, getmetatable, pairs, next, xpcall, tostring, type =
    G.error, G.rawget, G.rawset, G.setmetatable, G.getmetatable, G.pairs, G.next, G.xpcall,
    G.tostring, G.type
local loadstring, load, setfenv = G.loadstring, G.load, G.setfenv

-- Nothing a script can reach may read files or change environments, even through the
-- interpreter's own globals.
for _, name in pairs({ "dofile", "loadfile", "print", "require", "module", "setfenv", "getfenv",
    "newproxy", "package", "os", "io", "debug" }) do
    G[name] = nil
end

local function readonly()
    error("Attempt to modify a readonly table", 2)
end

-- The read-only tables (weak keys), which `rawset` refuses as Redis's read-only tables do.
local protected = setmetatable({}, { __mode = "k" })

-- A read-only view of `t`: reads go to `t`, writes fail.
local function protect(t)
    local view = setmetatable({}, { __index = t, __newindex = readonly, __metatable = false })
    protected[view] = true
    return view
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
-- Redis 7's `pcall`: an error table with an `err` field (what a failed `redis.call` raises)
-- comes back as its message, as errors were strings before Redis 7 (`luaRedisPcall`).
local pcall = G.pcall
local function message_of(ok, ...)
    if not ok then
        local e = ...
        if type(e) == "table" then
            local m = e.err
            if type(m) == "string" or type(m) == "number" then
                return false, m
            end
        end
    end
    return ok, ...
end
base.pcall = function(...)
    return message_of(pcall(...))
end
base.rawset = function(t, k, v)
    if protected[t] then
        error("Attempt to modify a readonly table", 0)
    end
    return rawset(t, k, v)
end
-- Code compiled by a script runs in the script's environment, not the interpreter's, and is
-- text: a precompiled (binary) chunk is refused as Redis's Lua refuses it (Lua 5.1 does not
-- verify bytecode).
local sub, byte, find, concat = G.string.sub, G.string.byte, G.string.find, G.table.concat
local function compile(code, name)
    if type(code) == "string" and byte(code, 1) == 27 then
        local first = sub(code, 1, (find(code, "\n", 1, true) or 0) - 1)
        if #first > 45 then
            first = sub(first, 1, 42) .. "..."
        end
        return nil, '[string "' .. first .. '"]:1: unexpected symbol near \'char(27)\''
    end
    local f, e = loadstring(code, name)
    if f then
        setfenv(f, base._G)
    end
    return f, e
end
base.loadstring = compile
base.load = function(reader, name)
    if type(reader) ~= "function" then
        return load(reader, name)
    end
    local parts = {}
    while true do
        local part = reader()
        if part == nil or part == "" then
            break
        end
        if type(part) ~= "string" then
            return nil, "reader function must return a string"
        end
        parts[#parts + 1] = part
    end
    return compile(concat(parts), name or "=(load)")
end
-- Strings' methods are the read-only string library; their metatable cannot be changed.
local string_meta = getmetatable("")
string_meta.__index = base.string
string_meta.__metatable = protect(string_meta)
for name, lib in pairs(libs) do
    base[name] = protect(lib)
end

-- `redis.call` and `redis.pcall`: the C functions of the `unsafe` feature (`direct`), or
-- wrappers of the Rust side, which answers `ok, value`; a failed call raises the error table
-- (`{err = ...}`) as Redis's does.
local redis = libs.redis
if direct then
    redis.call, redis.pcall = direct.call, direct.pcall
else
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
end
base.redis = protect(redis)

local env = setmetatable({}, { __index = base, __newindex = readonly, __metatable = false })
protected[env] = true
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

-- Runs `f` without the `KEYS` and `ARGV` globals (Redis's functions and libraries have none:
-- reading one is the missing-global error), then puts back what the last script had.
local function without_script_globals(f)
    local keys, argv = rawget(base, "KEYS"), rawget(base, "ARGV")
    rawset(base, "KEYS", nil)
    rawset(base, "ARGV", nil)
    local ok, result = xpcall(f, handler)
    rawset(base, "KEYS", keys)
    rawset(base, "ARGV", argv)
    scrub()
    return ok, result
end

-- Runs a library function (`FCALL`) with its keys and arguments: `ok, result`.
local function run_function(f, nkeys, ...)
    local keys, argv = split(nkeys, ...)
    return without_script_globals(function()
        return f(keys, argv)
    end)
end

-- Runs a library's code (`FUNCTION LOAD`): `ok, error`.
local function run_library(f)
    return without_script_globals(f)
end

-- (`base`: where the `unsafe` feature's runner sets `KEYS` and `ARGV` itself.)
return env, run_script, run_function, run_library, base
