//! `bit`: LuaBitOp 1.0.2 (32-bit operations on Lua numbers).

use mlua::{Lua, Table, Value};

use super::{Args, Fail, Registrar, Ret, multi};

/// Builds the `bit` module table.
pub(super) fn module(lua: &Lua, reg: &Registrar) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    reg.add(lua, &t, "tobit", |lua, a| ret(barg(lua, &a, 1)?))?;
    reg.add(lua, &t, "bnot", |lua, a| ret(!barg(lua, &a, 1)?))?;
    reg.add(lua, &t, "band", |lua, a| fold(lua, &a, |x, y| x & y))?;
    reg.add(lua, &t, "bor", |lua, a| fold(lua, &a, |x, y| x | y))?;
    reg.add(lua, &t, "bxor", |lua, a| fold(lua, &a, |x, y| x ^ y))?;
    reg.add(lua, &t, "lshift", |lua, a| shift(lua, &a, |b, n| b << n))?;
    reg.add(lua, &t, "rshift", |lua, a| shift(lua, &a, |b, n| b >> n))?;
    reg.add(lua, &t, "arshift", |lua, a| {
        shift(lua, &a, |b, n| ((b as i32) >> n) as u32)
    })?;
    reg.add(lua, &t, "rol", |lua, a| shift(lua, &a, u32::rotate_left))?;
    reg.add(lua, &t, "ror", |lua, a| shift(lua, &a, u32::rotate_right))?;
    reg.add(lua, &t, "bswap", |lua, a| {
        ret(barg(lua, &a, 1)?.swap_bytes())
    })?;
    reg.add(lua, &t, "tohex", |lua, a| {
        let mut b = barg(lua, &a, 1)?;
        let mut n = if a.get(2).is_none() {
            8
        } else {
            barg(lua, &a, 2)? as i32
        };
        let digits: &[u8; 16] = if n < 0 {
            n = n.wrapping_neg();
            b"0123456789ABCDEF"
        } else {
            b"0123456789abcdef"
        };
        let n = n.clamp(0, 8) as usize;
        let mut buf = vec![0u8; n];
        for slot in buf.iter_mut().rev() {
            *slot = digits[(b & 15) as usize];
            b >>= 4;
        }
        Ok(multi([Value::String(lua.create_string(buf)?)]))
    })?;
    Ok(t)
}

/// `barg`: the argument as 32 bits, rounding like the `2^52+2^51` trick.
fn barg(lua: &Lua, a: &Args, i: usize) -> Result<u32, Fail> {
    let n = a.to_number(lua, i);
    let b = (n.unwrap_or(0.0) + 6_755_399_441_055_744.0).to_bits() as u32;
    if b == 0 && n.is_none() {
        return Err(Fail::arg(
            i as i64,
            format!("number expected, got {}", a.typename(i)),
        ));
    }
    Ok(b)
}

fn ret(b: u32) -> Ret {
    Ok(multi([Value::Number(f64::from(b as i32))]))
}

fn fold(lua: &Lua, a: &Args, op: impl Fn(u32, u32) -> u32) -> Ret {
    let mut b = barg(lua, a, 1)?;
    for i in (2..=a.top()).rev() {
        b = op(b, barg(lua, a, i)?);
    }
    ret(b)
}

fn shift(lua: &Lua, a: &Args, op: impl Fn(u32, u32) -> u32) -> Ret {
    let b = barg(lua, a, 1)?;
    let n = barg(lua, a, 2)? & 31;
    ret(op(b, n))
}
