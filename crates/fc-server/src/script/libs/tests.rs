//! The libraries against redis-server 7.0.15: each case runs a Lua snippet with the
//! libraries installed and compares the string it returns with what Redis returned for the
//! same snippet (`EVAL <snippet> 0`), recorded once and written here as literals. Generated
//! from a list of snippets by a script run against a live server.

use mlua::{Lua, Value};

/// Runs `code` as Redis runs a script body (chunk `@user_script`) and returns the string it
/// returns.
fn run(code: &[u8]) -> Vec<u8> {
    let lua = Lua::new();
    super::install(&lua).expect("install");
    let redis = lua.create_table().expect("table");
    redis
        .set(
            "sha1hex",
            lua.create_function(|_, s: mlua::String| Ok(crate::script::sha1_hex(&s.as_bytes())))
                .expect("fn"),
        )
        .expect("set");
    lua.globals().set("redis", redis).expect("set redis");
    let v: Value = lua
        .load(code)
        .set_name("@user_script")
        .call(())
        .unwrap_or_else(|e| panic!("script failed: {e}"));
    match v {
        Value::String(s) => s.as_bytes().to_vec(),
        other => panic!("script returned {other:?}, not a string"),
    }
}

#[test]
fn cjson_encode_basic() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"[1,2,3,\"a\\/b\",0.1,0.33333333333333,1e+20,1.2345678901235e+17,-0,1e-05,1e+14,1e+15,{},{\"a\":{}},true,false]";
    assert_eq!(run(b"return cjson.encode({1,2,3,'a/b', 0.1, 1/3, 1e20, 123456789012345678, -0.0, 1e-5, 100000000000000, 1e15, {}, {a={}}, true, false})"), expected);
}

#[test]
fn cjson_encode_escapes() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"\"q\\\"b\\\\s\\/\\b\\f\\n\\r\\t\\u0001\\u001f\\u007f\x80z\"";
    assert_eq!(
        run(b"return cjson.encode('q\"b\\\\s/\\b\\f\\n\\r\\t\\1\\31\\127\\128z')"),
        expected
    );
}

#[test]
fn cjson_encode_object_order() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] =
        b"{\"a\":1,\"c\":[1,2],\"b\":\"x\",\"d\":{\"e\":false},\"5\":1,\"1.5\":2}";
    assert_eq!(
        run(b"return cjson.encode({a=1, b='x', c={1,2}, d={e=false}, [5]=1, [1.5]=2})"),
        expected
    );
}

#[test]
fn cjson_encode_scalars() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"null null true 42 \"s\" -1.5";
    assert_eq!(run(b"return table.concat({cjson.encode(nil), cjson.encode(cjson.null), cjson.encode(true), cjson.encode(42), cjson.encode('s'), cjson.encode(-1.5)}, ' ')"), expected);
}

#[test]
fn cjson_encode_nan_error() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"Cannot serialise number: must not be NaN or Inf";
    assert_eq!(run(b"return select(2, pcall(cjson.encode, 0/0))"), expected);
}

#[test]
fn cjson_encode_inf_key_error() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"Cannot serialise number: must not be NaN or Inf";
    assert_eq!(
        run(b"return select(2, pcall(cjson.encode, {[math.huge]=1}))"),
        expected
    );
}

#[test]
fn cjson_encode_sparse_error() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"Cannot serialise table: excessively sparse array";
    assert_eq!(
        run(b"return select(2, pcall(cjson.encode, {[1]=1,[20]=2}))"),
        expected
    );
}

#[test]
fn cjson_encode_sparse_safe() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"[1,null,null,null,null,null,null,null,null,\"x\"]";
    assert_eq!(run(b"return cjson.encode({[1]=1,[10]='x'})"), expected);
}

#[test]
fn cjson_encode_sparse_ratio_ok() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"[1,2,3,4,5,6,null,null,null,null,null,12]";
    assert_eq!(
        run(b"return cjson.encode({[1]=1,[2]=2,[3]=3,[4]=4,[5]=5,[6]=6,[12]=12})"),
        expected
    );
}

#[test]
fn cjson_encode_zero_key_object() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"{\"0\":\"z\"}";
    assert_eq!(run(b"return cjson.encode({[0]='z'})"), expected);
}

#[test]
fn cjson_encode_huge_key() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"true {\"1099511627776\":1}";
    assert_eq!(run(b"local ok, e = pcall(cjson.encode, {[2^40]=1}) return tostring(ok) .. ' ' .. tostring(e)"), expected);
}

#[test]
fn cjson_encode_bool_key_error() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"Cannot serialise boolean: table key must be a number or string";
    assert_eq!(
        run(b"return select(2, pcall(cjson.encode, {[true]=1}))"),
        expected
    );
}

#[test]
fn cjson_encode_function_error() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"Cannot serialise function: type not supported";
    assert_eq!(
        run(b"return select(2, pcall(cjson.encode, {f=tostring}))"),
        expected
    );
}

#[test]
fn cjson_encode_arg_count_pcall() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"bad argument #1 to '?' (expected 1 argument)";
    assert_eq!(run(b"return select(2, pcall(cjson.encode))"), expected);
}

#[test]
fn cjson_encode_arg_count_position() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"user_script:1: bad argument #1 to 'encode' (expected 1 argument)";
    assert_eq!(
        run(b"local ok, e = pcall(function() local r = cjson.encode(1, 2) return r end) return e"),
        expected
    );
}

#[test]
fn cjson_encode_arg_count_local_name() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"user_script:1: bad argument #1 to 'enc' (expected 1 argument)";
    assert_eq!(run(b"local enc = cjson.encode local ok, e = pcall(function() local r = enc() return r end) return e"), expected);
}

#[test]
fn cjson_encode_error_position_line2() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"user_script:2: Cannot serialise function: type not supported";
    assert_eq!(run(b"local ok, e = pcall(function()\n  local r = cjson.encode({f=tostring}) return r end) return e"), expected);
}

#[test]
fn cjson_encode_excessive_nesting() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"Cannot serialise, excessive nesting (1001)";
    assert_eq!(
        run(b"local t = {} t[1] = t return select(2, pcall(cjson.encode, t))"),
        expected
    );
}

#[test]
fn cjson_encode_max_depth_config() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"[[1]] Cannot serialise, excessive nesting (3)";
    assert_eq!(run(b"local c = cjson.new() c.encode_max_depth(2) local ok, e = pcall(c.encode, {{{1}}}) return c.encode({{1}}) .. ' ' .. e"), expected);
}

#[test]
fn cjson_encode_precision() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"[0.333,1.23e+04,0.000123] 0.33333333333333";
    assert_eq!(run(b"local c = cjson.new() c.encode_number_precision(3) return c.encode({1/3, 12345, 0.0001234}) .. ' ' .. cjson.encode(1/3)"), expected);
}

#[test]
fn cjson_encode_invalid_numbers_on() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"true [inf,-inf,nan]";
    assert_eq!(run(b"local c = cjson.new() local r = c.encode_invalid_numbers(true) return tostring(r) .. ' ' .. c.encode({1/0, -1/0, 0/0})"), expected);
}

#[test]
fn cjson_encode_invalid_numbers_null() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"null [null,null,1]";
    assert_eq!(run(b"local c = cjson.new() local r = c.encode_invalid_numbers('null') return tostring(r) .. ' ' .. c.encode({1/0, 0/0, 1})"), expected);
}

#[test]
fn cjson_config_defaults() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"false,true,1000,1000,14,true,false,2,10";
    assert_eq!(run(b"local a, b, c = cjson.encode_sparse_array() return table.concat({tostring(cjson.encode_invalid_numbers()), tostring(cjson.decode_invalid_numbers()), cjson.encode_max_depth(), cjson.decode_max_depth(), cjson.encode_number_precision(), tostring(cjson.encode_keep_buffer()), tostring(a), b, c}, ',')"), expected);
}

#[test]
fn cjson_config_errors() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"user_script:1: bad argument #1 to 'encode_number_precision' (expected integer between 1 and 14)|user_script:1: bad argument #1 to 'encode_max_depth' (expected integer between 1 and 2147483647)|user_script:1: bad argument #1 to 'encode_sparse_array' (expected integer between 0 and 2147483647)|user_script:1: bad argument #1 to 'encode_invalid_numbers' (invalid option 'maybe')|user_script:1: bad argument #1 to 'encode_keep_buffer' (string expected, got table)|user_script:1: bad argument #2 to 'decode_max_depth' (found too many arguments)|user_script:1: bad argument #1 to 'encode_number_precision' (number expected, got string)";
    assert_eq!(run(b"local c = cjson.new() local r = {} for _, f in ipairs({function() local r = c.encode_number_precision(15) return r end, function() local r = c.encode_max_depth(0) return r end, function() local r = c.encode_sparse_array(true, -1) return r end, function() local r = c.encode_invalid_numbers('maybe') return r end, function() local r = c.encode_keep_buffer({}) return r end, function() local r = c.decode_max_depth(1, 2) return r end, function() local r = c.encode_number_precision('x') return r end}) do local ok, e = pcall(f) r[#r+1] = e end return table.concat(r, '|')"), expected);
}

#[test]
fn cjson_sparse_convert() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"true35 {\"1\":1,\"20\":2}";
    assert_eq!(run(b"local c = cjson.new() local a, b, s = c.encode_sparse_array(true, 3, 5) return tostring(a) .. b .. s .. ' ' .. c.encode({[1]=1,[20]=2})"), expected);
}

#[test]
fn cjson_new_independent() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"0.33333333333333 0.33 true2.1.0cjson";
    assert_eq!(run(b"local c = cjson.new() c.encode_number_precision(2) return cjson.encode(1/3) .. ' ' .. c.encode(1/3) .. ' ' .. tostring(c.null == cjson.null) .. c._VERSION .. c._NAME"), expected);
}

#[test]
fn cjson_names() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"cjson 2.1.0 userdata false";
    assert_eq!(run(b"return cjson._NAME .. ' ' .. cjson._VERSION .. ' ' .. type(cjson.null) .. ' ' .. tostring(cjson.null == nil)"), expected);
}

#[test]
fn cjson_decode_basic() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"{\"a\":[1,2,{\"b\":null}],\"c\":\"x\xc3\xa9\xf0\x9f\x98\x80\\/\\n\",\"e\":false,\"d\":true,\"f\":-1500} truenumber";
    assert_eq!(run(b"local t = cjson.decode('{\"a\":[1,2,{\"b\":null}],\"c\":\"x\\\\u00e9\\\\ud83d\\\\ude00\\\\/\\\\n\",\"d\":true,\"e\":false,\"f\":-1.5e3}') return cjson.encode(t) .. ' ' .. tostring(t.a[3].b == cjson.null) .. type(t.f)"), expected);
}

#[test]
fn cjson_decode_numbers() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"16,inf,-inf,5,inf,7,0.0015,-0,100";
    assert_eq!(run(b"local t = cjson.decode('[0x10, Infinity, -inf, +5, 1e400, 007, 1.5e-3, -0, 1E2]') local r = {} for i, v in ipairs(t) do r[i] = tostring(v) end return table.concat(r, ',')"), expected);
}

#[test]
fn cjson_decode_nan() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"nan-nannan";
    assert_eq!(run(b"return tostring(cjson.decode('nan')) .. tostring(cjson.decode('-nan')) .. tostring(cjson.decode('NaN'))"), expected);
}

#[test]
fn cjson_decode_strict_numbers() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"Expected value but found invalid number at character 1|Expected value but found invalid token at character 1|Expected value but found invalid token at character 1|Expected value but found invalid number at character 1|Expected value but found invalid token at character 1|Expected value but found invalid number at character 1";
    assert_eq!(run(b"local c = cjson.new() c.decode_invalid_numbers(false) local r = {} for _, s in ipairs({'0x10', '+1', 'inf', '007', 'nan', '-Infinity'}) do local ok, e = pcall(c.decode, s) r[#r+1] = tostring(e) end return table.concat(r, '|')"), expected);
}

#[test]
fn cjson_decode_errors() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"Expected value but found T_END at character 1|Expected comma or array end but found T_END at character 5|Expected colon but found T_NUMBER at character 6|Expected object key string but found T_NUMBER at character 2|Expected value but found T_ARR_END at character 4|Expected value but found invalid token at character 1|Expected value but found unexpected end of string at character 5|Expected value but found invalid escape code at character 2|Expected value but found invalid unicode escape code at character 2|Expected value but found invalid unicode escape code at character 2|Expected value but found invalid unicode escape code at character 2|Expected the end but found invalid token at character 5|Expected value but found invalid number at character 1|Expected value but found invalid token at character 1|Expected object key string but found T_OBJ_END at character 8|Expected value but found T_END at character 3|Expected value but found invalid token at character 1|Expected the end but found invalid token at character 5|Expected value but found T_END at character 2|Expected value but found T_END at character 6|Expected value but found T_ARR_END at character 1";
    assert_eq!(run(b"local r = {} for _, s in ipairs({'', '[1,2', '{\"a\" 1}', '{1:2}', '[1,]', 'tru', '\"abc', '\"\\\\x\"', '\"\\\\ud800\"', '\"\\\\udc00\\\\ud800\"', '\"\\\\u12\"', '[1] x', '-', '.5', '{\"a\":1,}', '  ', 'nul', 'truex', '[', '{\"a\":', ']'}) do local ok, e = pcall(cjson.decode, s) r[#r+1] = e end return table.concat(r, '|')"), expected);
}

#[test]
fn cjson_decode_utf16() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"JSON parser does not support UTF-16 or UTF-32";
    assert_eq!(
        run(b"return select(2, pcall(cjson.decode, 'a\\0b'))"),
        expected
    );
}

#[test]
fn cjson_decode_embedded_nul() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"[1]";
    assert_eq!(
        run(b"return cjson.encode(cjson.decode('[1]\\0garbage'))"),
        expected
    );
}

#[test]
fn cjson_decode_depth() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"Found too many nested data structures (1001) at character 1001|Found too many nested data structures (1001) at character 5001|2000";
    assert_eq!(run(b"local ok, e = pcall(cjson.decode, string.rep('[', 1001)) local ok2, e2 = pcall(cjson.decode, string.rep('{\"a\":', 1001)) return e .. '|' .. e2 .. '|' .. #cjson.encode(cjson.decode(string.rep('[', 1000) .. string.rep(']', 1000)))"), expected);
}

#[test]
fn cjson_decode_depth_config() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"Found too many nested data structures (3) at character 3 [[1]]";
    assert_eq!(run(b"local c = cjson.new() c.decode_max_depth(2) local ok, e = pcall(c.decode, '[[[1]]]') return e .. ' ' .. c.encode(c.decode('[[1]]'))"), expected);
}

#[test]
fn cjson_decode_arg_errors() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"bad argument #1 to '?' (expected 1 argument)|bad argument #1 to '?' (string expected, got nil)|bad argument #1 to '?' (string expected, got table)|123";
    assert_eq!(run(b"local ok, e = pcall(cjson.decode) local ok2, e2 = pcall(cjson.decode, nil) local ok3, e3 = pcall(cjson.decode, {}) return e .. '|' .. e2 .. '|' .. e3 .. '|' .. cjson.decode(123)"), expected);
}

#[test]
fn cjson_decode_error_position() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"user_script:1: Expected value but found T_END at character 2";
    assert_eq!(
        run(b"local ok, e = pcall(function() local x = cjson.decode('[') return x end) return e"),
        expected
    );
}

#[test]
fn cjson_decode_control_chars() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"\"a\\tb\\u0001c\"";
    assert_eq!(
        run(b"return cjson.encode(cjson.decode('\"a\\tb\\1c\"'))"),
        expected
    );
}

#[test]
fn cjson_round_trip() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"{\"name\":\"x\",\"list\":[1,2.5,\"three\",[4]],\"flag\":true,\"nested\":{\"a\":{\"b\":{\"c\":\"deep\"}}},\"n\":-12} {\"name\":\"x\",\"list\":[1,2.5,\"three\",[4]],\"flag\":true,\"nested\":{\"a\":{\"b\":{\"c\":\"deep\"}}},\"n\":-12}";
    assert_eq!(run(b"local v = {name='x', list={1,2.5,'three',{4}}, flag=true, n=-12, nested={a={b={c='deep'}}}} local s = cjson.encode(v) return s .. ' ' .. cjson.encode(cjson.decode(s))"), expected);
}

#[test]
fn cjson_round_trip_object_keys() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"{\"y\":2,\"x\":3,\"z\":1,\"1\":6,\"w\":4,\"v\":5}";
    assert_eq!(run(b"local t = cjson.decode('{\"z\":1,\"y\":2,\"x\":3,\"w\":4,\"v\":5,\"1\":6}') return cjson.encode(t)"), expected);
}

#[test]
fn cmsgpack_names() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"cmsgpack|lua-cmsgpack 0.4.0|Copyright (C) 2012, Salvatore Sanfilippo|MessagePack C implementation for Lua";
    assert_eq!(run(b"return table.concat({cmsgpack._NAME, cmsgpack._VERSION, cmsgpack._COPYRIGHT, cmsgpack._DESCRIPTION}, '|')"), expected);
}

#[test]
fn cmsgpack_pack_ints() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"00017fcc80ccffcd0100cdffffce00010000ceffffffffcf0000000100000000ffe0d0dfd080d1ff7fd18000d2ffff7fffd280000000d3ffffffff7fffffffcf0020000000000000d3ffe0000000000000";
    assert_eq!(run(b"local function hex(s) return (s:gsub('.', function(c) return string.format('%02x', c:byte()) end)) end return hex(cmsgpack.pack(0, 1, 127, 128, 255, 256, 65535, 65536, 4294967295, 4294967296, -1, -32, -33, -128, -129, -32768, -32769, -2147483648, -2147483649, 2^53, -2^53))"), expected);
}

#[test]
fn cmsgpack_pack_floats() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"ca3f000000ca3fc00000cb3fb999999999999acac0100000ca7f800000caff800000ca5f000000ca5f800000cb7e37e43c8800759c";
    assert_eq!(run(b"local function hex(s) return (s:gsub('.', function(c) return string.format('%02x', c:byte()) end)) end return hex(cmsgpack.pack(0.5, 1.5, 0.1, -2.25, 1/0, -1/0, 2^63, 2^64, 1e300))"), expected);
}

#[test]
fn cmsgpack_pack_nan() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"cbfff8000000000000 cb7ff8000000000000";
    assert_eq!(run(b"local function hex(s) return (s:gsub('.', function(c) return string.format('%02x', c:byte()) end)) end return hex(cmsgpack.pack(0/0)) .. ' ' .. hex(cmsgpack.pack(-(0/0)))"), expected);
}

#[test]
fn cmsgpack_pack_strings() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"a0a3616263bf78787878787878787878787878787878787878787878787878787878787878 d9207979 d9ff7979 da010079 db0001000079";
    assert_eq!(run(b"local function hex(s) return (s:gsub('.', function(c) return string.format('%02x', c:byte()) end)) end return hex(cmsgpack.pack('', 'abc', string.rep('x', 31))) .. ' ' .. hex(cmsgpack.pack(string.rep('y', 32))):sub(1, 8) .. ' ' .. hex(cmsgpack.pack(string.rep('y', 255))):sub(1, 8) .. ' ' .. hex(cmsgpack.pack(string.rep('y', 256))):sub(1, 8) .. ' ' .. hex(cmsgpack.pack(string.rep('y', 65536))):sub(1, 12)"), expected);
}

#[test]
fn cmsgpack_pack_misc() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"c0c3c2c0c0909301020381a16101820101030381ca3fc0000001810001";
    assert_eq!(run(b"local function hex(s) return (s:gsub('.', function(c) return string.format('%02x', c:byte()) end)) end return hex(cmsgpack.pack(nil, true, false, cjson.null, tostring, {}, {1,2,3}, {a=1}, {[1]=1,[3]=3}, {[1.5]=1}, {[0]=1}))"), expected);
}

#[test]
fn cmsgpack_pack_big_table() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"dc0014 de0011 23 79 1a7c547679dc38090b5306978f1fe68a0da140ff";
    assert_eq!(run(b"local t, m = {}, {} for i = 1, 20 do t[i] = i end for i = 1, 17 do m['k' .. i] = i end local s = cmsgpack.pack(t) local s2 = cmsgpack.pack(m) return string.format('%02x%02x%02x', s:byte(1, 3)) .. ' ' .. string.format('%02x%02x%02x', s2:byte(1, 3)) .. ' ' .. #s .. ' ' .. #s2 .. ' ' .. redis.sha1hex(s)"), expected);
}

#[test]
fn cmsgpack_pack_nesting() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"91919191919191919191919191919191c0";
    assert_eq!(run(b"local t = {} local cur = t for i = 1, 20 do cur[1] = {} cur = cur[1] end local function hex(s) return (s:gsub('.', function(c) return string.format('%02x', c:byte()) end)) end return hex(cmsgpack.pack(t))"), expected);
}

#[test]
fn cmsgpack_pack_cycle() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"91919191919191919191919191919191c0";
    assert_eq!(run(b"local t = {} t[1] = t local function hex(s) return (s:gsub('.', function(c) return string.format('%02x', c:byte()) end)) end return hex(cmsgpack.pack(t))"), expected);
}

#[test]
fn cmsgpack_pack_map_sha() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"e40b7be3b0f5da1d9343f5a0d259877eaadab093";
    assert_eq!(run(b"local m = {alpha=1, beta={1,2,{x='y'}}, gamma=-7.5, delta='str', [10]=false} return redis.sha1hex(cmsgpack.pack(m, 'tail', 3.25))"), expected);
}

#[test]
fn cmsgpack_pack_noargs() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"bad argument #0 to '?' (MessagePack pack needs input.)|user_script:1: bad argument #0 to 'pack' (MessagePack pack needs input.)";
    assert_eq!(run(b"local ok, e = pcall(cmsgpack.pack) local ok2, e2 = pcall(function() local r = cmsgpack.pack() return r end) return e .. '|' .. e2"), expected);
}

#[test]
fn cmsgpack_unpack_values() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"1,-5,300,70000,5000000000,-40000,0.5,0.1,str,true,false";
    assert_eq!(run(b"local r = {} for _, v in ipairs({cmsgpack.unpack(cmsgpack.pack(1, -5, 300, 70000, 5000000000, -40000, 0.5, 0.1, 'str', true, false))}) do r[#r+1] = tostring(v) end return table.concat(r, ',')"), expected);
}

#[test]
fn cmsgpack_unpack_wire() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"200,-128,256,-256,65536,-256,-1,-2,abc,hi,z,-32,127";
    assert_eq!(run(b"local r = {} for _, v in ipairs({cmsgpack.unpack('\\204\\200\\208\\128\\205\\1\\0\\209\\255\\0\\206\\0\\1\\0\\0\\210\\255\\255\\255\\0\\207\\255\\255\\255\\255\\255\\255\\255\\255\\211\\255\\255\\255\\255\\255\\255\\255\\254\\217\\3abc\\218\\0\\2hi\\219\\0\\0\\0\\1z\\224\\127')}) do r[#r+1] = tostring(v) end return table.concat(r, ',')"), expected);
}

#[test]
fn cmsgpack_unpack_tables() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"[[1,\"two\",[3]],{\"k\":\"v\",\"2\":true},{}]";
    assert_eq!(run(b"local a, m, n = cmsgpack.unpack(cmsgpack.pack({1, 'two', {3}}, {k='v', [2]=true}, {})) return cjson.encode({a, m, n})"), expected);
}

#[test]
fn cmsgpack_unpack_fixmap_hash() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"{\"a\":1,\"b\":[1,2]}";
    assert_eq!(
        run(b"local t = cmsgpack.unpack('\\130\\161a\\1\\161b\\146\\1\\2') return cjson.encode(t)"),
        expected
    );
}

#[test]
fn cmsgpack_unpack_nil_in_array() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"1nil3";
    assert_eq!(run(b"local t = cmsgpack.unpack('\\147\\1\\192\\3') return tostring(#t) .. tostring(t[2]) .. tostring(t[3])"), expected);
}

#[test]
fn cmsgpack_unpack_count() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"0 3 7999";
    assert_eq!(run(b"return select('#', cmsgpack.unpack('')) .. ' ' .. select('#', cmsgpack.unpack('\\192\\192\\192')) .. ' ' .. select('#', cmsgpack.unpack(string.rep('\\1', 7999)))"), expected);
}

#[test]
fn cmsgpack_unpack_errors() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"Bad data format in input.|Missing bytes in input.|Missing bytes in input.|Missing bytes in input.|table index is nil|Bad data format in input.|stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)";
    assert_eq!(run(b"local r = {} for _, s in ipairs({'\\193', '\\145', '\\205\\1', '\\217\\5ab', '\\129\\192\\1', '\\196\\1a', string.rep('\\1', 8000)}) do local ok, e = pcall(cmsgpack.unpack, s) r[#r+1] = e end return table.concat(r, '|')"), expected);
}

#[test]
fn cmsgpack_unpack_one() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"1,1,5,two,-1,3,1";
    assert_eq!(run(b"local s = cmsgpack.pack(1, 'two', {3}) local o1, v1 = cmsgpack.unpack_one(s) local o2, v2 = cmsgpack.unpack_one(s, o1) local o3, v3 = cmsgpack.unpack_one(s, o2) return table.concat({o1, tostring(v1), o2, tostring(v2), o3, tostring(v3[1]), select('#', cmsgpack.unpack_one(s, #s))}, ',')"), expected);
}

#[test]
fn cmsgpack_unpack_limit() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"2,1,2|-1,3,4|1,2,3,4";
    assert_eq!(run(b"local s = cmsgpack.pack(1, 2, 3, 4) local r = {cmsgpack.unpack_limit(s, 2)} local r2 = {cmsgpack.unpack_limit(s, 5, 2)} local r3 = {cmsgpack.unpack_limit(s, 0, 0)} return table.concat(r, ',') .. '|' .. table.concat(r2, ',') .. '|' .. table.concat(r3, ',')"), expected);
}

#[test]
fn cmsgpack_unpack_arg_errors() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"user_script:1: Start offset 5 greater than input length 2.|user_script:1: Invalid request to unpack with offset of -1 and limit of 2.|user_script:1: Invalid request to unpack with offset of 0 and limit of 2.|user_script:1: bad argument #2 to 'unpack_limit' (number expected, got no value)|user_script:1: bad argument #1 to 'unpack' (string expected, got no value)|user_script:1: bad argument #1 to 'unpack_one' (string expected, got no value)";
    assert_eq!(run(b"local r = {} for _, f in ipairs({function() local r = cmsgpack.unpack_one('ab', 5) return r end, function() local r = cmsgpack.unpack_one('ab', -1) return r end, function() local r = cmsgpack.unpack_limit('ab', -1) return r end, function() local r = cmsgpack.unpack_limit('ab') return r end, function() local r = cmsgpack.unpack() return r end, function() local r = cmsgpack.unpack_one() return r end}) do local ok, e = pcall(f) r[#r+1] = e end return table.concat(r, '|')"), expected);
}

#[test]
fn cmsgpack_round_trip() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] =
        b"daa0f9b5101d95c313ebeceeac12b3e1caa299f7 false [1,2.5,\"three\",[4,[5]]]";
    assert_eq!(run(b"local v = {list={1, 2.5, 'three', {4, {5}}}, flag=true, neg=-129, big=2^40, f=0.1} local s = cmsgpack.pack(v) local back = cmsgpack.unpack(s) return redis.sha1hex(s) .. ' ' .. tostring(cmsgpack.pack(back) == s) .. ' ' .. cjson.encode(back.list)"), expected);
}

#[test]
fn bit_basic() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"2,2,-2,5,-1,-2147483648,-1,12,15,240,-1";
    assert_eq!(run(b"return table.concat({bit.tobit(1.5), bit.tobit(2.5), bit.tobit(-1.5), bit.tobit(2^32+5), bit.tobit(0xffffffff), bit.tobit(2^31), bit.bnot(0), bit.band(0xff, 0x0f, 0x3c), bit.bor(1, 2, 4, 8), bit.bxor(0xff, 0x0f), bit.band(-1)}, ',')"), expected);
}

#[test]
fn bit_shifts() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"-2147483648,1,6,15,-16,16,878082066,2014458966,1,1,2018915346,-1";
    assert_eq!(run(b"return table.concat({bit.lshift(1, 31), bit.lshift(1, 32), bit.lshift(3, 33), bit.rshift(-1, 28), bit.arshift(-256, 4), bit.arshift(256, 4), bit.rol(0x12345678, 8), bit.ror(0x12345678, 8), bit.rol(1, 0), bit.ror(1, 32), bit.bswap(0x12345678), bit.bswap(-1)}, ',')"), expected);
}

#[test]
fn bit_tohex() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"000000ff,ffffffff,FFFF,abcd,1234ABCD,00000001,,00000010";
    assert_eq!(run(b"return table.concat({bit.tohex(255), bit.tohex(-1), bit.tohex(-1, -4), bit.tohex(0x1234abcd, 4), bit.tohex(0x1234abcd, -8), bit.tohex(1, 12), bit.tohex(1, 0), bit.tohex('16')}, ',')"), expected);
}

#[test]
fn bit_errors() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"user_script:1: bad argument #1 to 'band' (number expected, got no value)|user_script:1: bad argument #1 to 'tobit' (number expected, got string)|user_script:1: bad argument #2 to 'bor' (number expected, got table)|user_script:1: bad argument #2 to 'lshift' (number expected, got no value)|user_script:1: bad argument #2 to 'tohex' (number expected, got nil)|bad argument #1 to '?' (number expected, got no value)";
    assert_eq!(run(b"local r = {} for _, f in ipairs({function() local r = bit.band() return r end, function() local r = bit.tobit('x') return r end, function() local r = bit.bor(1, {}) return r end, function() local r = bit.lshift(1) return r end, function() local r = bit.tohex(1, nil) return r end}) do local ok, e = pcall(f) r[#r+1] = e end return table.concat(r, '|') .. '|' .. select(2, pcall(bit.bnot))"), expected);
}

#[test]
fn bit_string_args() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"10,15,630506365,0,0";
    assert_eq!(run(b"return table.concat({bit.tobit('10'), bit.band('0xff', ' 15 '), bit.tobit(1e100), bit.tobit(-0.5), bit.tobit(0.5)}, ',')"), expected);
}

#[test]
fn struct_pack_ints() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"fffffffefffffffffffdfffffffffffffffffffffffc00000100000000000000000000000005 fffffefffffffdfffffffffffffffcffffffffffffff0000000000010000";
    assert_eq!(run(b"local function hex(s) return (s:gsub('.', function(c) return string.format('%02x', c:byte()) end)) end return hex(struct.pack('>bBhHiIlLT', -1, 255, -2, 65535, -3, 4294967295, -4, 2^40, 5)) .. ' ' .. hex(struct.pack('<bBhHiIlL', -1, 255, -2, 65535, -3, 4294967295, -4, 2^40))"), expected);
}

#[test]
fn struct_pack_sizes() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] =
        b"fffffe020107fffffffffffffff7 ffffffffffffffff0000000000000000 0000000000000000 06";
    assert_eq!(run(b"local function hex(s) return (s:gsub('.', function(c) return string.format('%02x', c:byte()) end)) end return hex(struct.pack('>i3I2i1i8', -2, 513, 7, -9)) .. ' ' .. hex(struct.pack('<i16', -1)) .. ' ' .. hex(struct.pack('>I8', 2^64)) .. ' ' .. hex(struct.pack('<i0b', 5, 6))"), expected);
}

#[test]
fn struct_pack_floats() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"0000c03f9a9999999999b9bf3fc00000bfb999999999999a";
    assert_eq!(run(b"local function hex(s) return (s:gsub('.', function(c) return string.format('%02x', c:byte()) end)) end return hex(struct.pack('<fd>fd', 1.5, -0.1, 1.5, -0.1))"), expected);
}

#[test]
fn struct_pack_strings() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"61626368697a6564000071";
    assert_eq!(run(b"local function hex(s) return (s:gsub('.', function(c) return string.format('%02x', c:byte()) end)) end return hex(struct.pack('c3c0sxc', 'abcdef', 'hi', 'zed', 'q'))"), expected);
}

#[test]
fn struct_pack_align() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"01000000020000000300000000000000000000000000104005000600 010000020000";
    assert_eq!(run(b"local function hex(s) return (s:gsub('.', function(c) return string.format('%02x', c:byte()) end)) end return hex(struct.pack('!4bi!8bd !2bh', 1, 2, 3, 4, 5, 6)) .. ' ' .. hex(struct.pack('!bi3', 1, 2))"), expected);
}

#[test]
fn struct_unpack_values() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"-1,255,-300,65000,-70000,4000000000,-5,1099511627776,xy,zz,36";
    assert_eq!(run(b"local r = {struct.unpack('>bBhHiIlLc2s', struct.pack('>bBhHiIlLc2s', -1, 255, -300, 65000, -70000, 4000000000, -5, 2^40, 'xy', 'zz'))} for i, v in ipairs(r) do r[i] = tostring(v) end return table.concat(r, ',')"), expected);
}

#[test]
fn struct_unpack_floats_pos() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"0.10000000149012,0.1,7,15,7,15";
    assert_eq!(run(b"local s = struct.pack('<fdI2', 0.1, 0.1, 7) local a, b, c, n = struct.unpack('<fdI2', s) local d, n2 = struct.unpack('<I2', s, 13) return table.concat({tostring(a), tostring(b), c, n, d, n2}, ',')"), expected);
}

#[test]
fn struct_unpack_c0() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"abc,d,6|-1,1,3";
    assert_eq!(run(b"local r = {struct.unpack('bc0c1', '\\3abcdef')} return table.concat(r, ',') .. '|' .. table.concat({struct.unpack('i1i1', '\\255\\1')}, ',')"), expected);
}

#[test]
fn struct_unpack_i16_signext() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"-1,17,66051,-1";
    assert_eq!(run(b"local s = string.rep('\\255', 16) local a, n = struct.unpack('<i16', s) local b = struct.unpack('>I3', '\\1\\2\\3') local c = struct.unpack('<i3', '\\255\\255\\255') return table.concat({tostring(a), n, b, c}, ',')"), expected);
}

#[test]
fn struct_size() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"0,16,3,8,33,32,0,16";
    assert_eq!(run(b"return table.concat({struct.size('z'), struct.size('!8bd'), struct.size('i3'), struct.size('T'), struct.size('bhilfdxc5'), struct.size('!bhilfd'), struct.size('  '), struct.size('I16')}, ',')"), expected);
}

#[test]
fn struct_errors() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"user_script:2: integral size overflow|user_script:3: integral size 33 is larger than limit of 32|user_script:4: bad argument #1 to 'pack' (invalid format option '=')|user_script:5: bad argument #3 to 'pack' (string too short)|user_script:6: alignment 3 is not a power of 2|user_script:7: bad argument #2 to 'unpack' (data string too short)|user_script:8: bad argument #1 to 'size' (option 's' has no fixed size)|user_script:9: bad argument #1 to 'size' (option 'c0' has no fixed size)|user_script:10: bad argument #1 to 'pack' (invalid format option 'z')|user_script:11: unfinished string in data|user_script:12: bad argument #2 to 'pack' (number expected, got nil)|5|user_script:14: bad argument #2 to 'pack' (string expected, got table)|user_script:15: bad argument #3 to 'unpack' (offset must be 1 or greater)|user_script:16: bad argument #2 to 'unpack' (data string too short)|user_script:17: format 'c0' needs a previous size|user_script:18: bad argument #2 to 'unpack' (data string too short)|user_script:19: bad argument #1 to 'pack' (string expected, got no value)|user_script:20: bad argument #2 to 'unpack' (string expected, got no value)|1|user_script:22: bad argument #1 to 'pack' (invalid format option '4')";
    assert_eq!(run(b"local r = {} for _, f in ipairs({\n function() local r = struct.pack('i99999999999', 1) return r end,\n function() local r = struct.pack('i33', 1) return r end,\n function() local r = struct.pack('=i', 1) return r end,\n function() local r = struct.pack('c5', 'ab') return r end,\n function() local r = struct.pack('!3i', 1) return r end,\n function() local r = struct.unpack('i', 'ab') return r end,\n function() local r = struct.size('s') return r end,\n function() local r = struct.size('c0') return r end,\n function() local r = struct.pack('z') return r end,\n function() local r = struct.unpack('s', 'abc') return r end,\n function() local r = struct.pack('i', nil) return r end,\n function() local r = struct.pack('c', 5) return r end,\n function() local r = struct.pack('s', {}) return r end,\n function() local r = struct.unpack('i', 'abcd', 0) return r end,\n function() local r = struct.unpack('i', 'abcd', -1) return r end,\n function() local r = struct.unpack('c0', 'abc') return r end,\n function() local r = struct.unpack('bc0', '\\9ab') return r end,\n function() local r = struct.pack() return r end,\n function() local r = struct.unpack('b') return r end,\n function() local r = struct.size('b4') return r end,\n function() local r = struct.pack('b4', 1) return r end,\n}) do local ok, e = pcall(f) r[#r+1] = tostring(e) end return table.concat(r, '|')"), expected);
}

#[test]
fn struct_round_trip() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"29 -7,1234,-99999,2.5,nul-term,rest,30";
    assert_eq!(run(b"local s = struct.pack('>!4 b h i d s c0', -7, 1234, -99999, 2.5, 'nul-term', 'rest') local r = {struct.unpack('>!4 b h i d s c4', s)} for i, v in ipairs(r) do r[i] = tostring(v) end return #s .. ' ' .. table.concat(r, ',')"), expected);
}

#[test]
fn struct_nul_in_format() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"1";
    assert_eq!(run(b"return tostring(struct.size(\"b\\0i\"))"), expected);
}

#[test]
fn cmsgpack_unpack_many_nils() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"2000 1502 2";
    assert_eq!(run(b"local n = select('#', cmsgpack.unpack(string.rep('\\192', 2000))) local t = {cmsgpack.unpack(string.rep('\\1', 1500) .. '\\192\\2')} return n .. ' ' .. #t .. ' ' .. tostring(t[1502])"), expected);
}

#[test]
fn cmsgpack_deep_nesting() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"stack overflow (in function mp_decode_to_lua_array)|stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)|table";
    assert_eq!(run(b"local ok, e = pcall(cmsgpack.unpack, string.rep('\\145', 5000) .. '\\1') local ok2, e2 = pcall(cmsgpack.unpack, string.rep('\\129\\1', 4500) .. '\\1') local ok3, t3 = pcall(cmsgpack.unpack, string.rep('\\129\\1', 3000) .. '\\1') return e .. '|' .. e2 .. '|' .. type(t3)"), expected);
}

#[test]
fn cjson_deep_nesting_raised_limit() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"Found too many nested data structures (7999) at character 7999|Found too many nested data structures (4000) at character 19996|Cannot serialise, excessive nesting (7998)|Cannot serialise, excessive nesting (4000)";
    assert_eq!(run(b"local c = cjson.new() c.decode_max_depth(100000) c.encode_max_depth(100000) local ok, e = pcall(c.decode, string.rep('[', 9000)) local ok2, e2 = pcall(c.decode, string.rep('{\"k\":', 9000)) local t = {} t[1] = t local ok3, e3 = pcall(c.encode, t) local u = {} u.k = u local ok4, e4 = pcall(c.encode, u) return e .. '|' .. e2 .. '|' .. e3 .. '|' .. e4"), expected);
}

#[test]
fn struct_unpack_many() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"3001 7 3001";
    assert_eq!(run(b"local s = string.rep('\\7', 3000) local t = {struct.unpack(string.rep('b', 3000), s)} return #t .. ' ' .. t[3000] .. ' ' .. t[3001]"), expected);
}

#[test]
fn error_prefix_non_tail() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"user_script:1: bad argument #1 to 'pack' (invalid format option 'z')|user_script:1: Bad data format in input.|user_script:1: bad argument #1 to 'tobit' (number expected, got table)";
    assert_eq!(run(b"local ok, e = pcall(function() local r = struct.pack('z') return r end) local ok2, e2 = pcall(function() local r = cmsgpack.unpack('\\193') return r end) local ok3, e3 = pcall(function() local r = bit.tobit({}) return r end) return e .. '|' .. e2 .. '|' .. e3"), expected);
}

#[test]
fn method_call_argerror() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] = b"user_script:1: Cannot serialise function: type not supported";
    assert_eq!(
        run(b"local ok, e = pcall(function() local r = cjson:encode() return r end) return e"),
        expected
    );
}

#[test]
fn wide_values_many_refs() {
    // Expected value from redis-server 7.0.15.
    let expected: &[u8] =
        b"168895 317789 77 42d4fa20e1d86662dccda6490f9d2a8f6fc49aec 7999 20000 7991";
    assert_eq!(run(b"local t, u = {}, {} for i = 1, 20000 do t[i] = 's' .. i u['k' .. i] = {i} end local j = cjson.encode(t) local j2 = cjson.encode(u) local back = cjson.decode(j2) local p = cmsgpack.pack(t) local n = select('#', cmsgpack.unpack(string.rep('\\161a', 7999))) local m = cmsgpack.unpack(cmsgpack.pack(u)) local cnt = 0 for _ in pairs(m) do cnt = cnt + 1 end return #j .. ' ' .. #j2 .. ' ' .. back.k77[1] .. ' ' .. redis.sha1hex(p) .. ' ' .. n .. ' ' .. cnt .. ' ' .. select('#', struct.unpack(string.rep('c1', 7990), string.rep('x', 7990)))"), expected);
}
