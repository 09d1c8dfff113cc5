//! `struct`: Roberto Ierusalimschy's struct library (v1.4 with Redis's fixes).

use mlua::{Lua, Table, Value};

use super::num::{double_to_i64, double_to_u64};
use super::{Args, Fail, MAX_C_STACK, Registrar, Ret, lstr, multi, to_number};

/// Largest size of an `i`/`I` integer.
const MAXINTSIZE: i64 = 32;
/// Default `!` alignment (`max(alignof(double), sizeof(int))` on x86-64).
const MAXALIGN: i64 = 8;

/// Builds the `struct` module table.
pub(super) fn module(lua: &Lua, reg: &Registrar) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    reg.add(lua, &t, "pack", pack)?;
    reg.add(lua, &t, "unpack", unpack)?;
    reg.add(lua, &t, "size", size)?;
    Ok(t)
}

struct Header {
    little: bool,
    align: usize,
}

impl Default for Header {
    fn default() -> Self {
        Header {
            little: true,
            align: 1,
        }
    }
}

/// The format string as C sees it (up to the first NUL).
fn format(lua: &Lua, a: &Args) -> Result<Vec<u8>, Fail> {
    let mut f = a.bytes(lua, 1)?;
    if let Some(p) = f.iter().position(|&c| c == 0) {
        f.truncate(p);
    }
    Ok(f)
}

struct Fmt {
    bytes: Vec<u8>,
    at: usize,
}

impl Fmt {
    fn next(&mut self) -> Option<u8> {
        let c = self.bytes.get(self.at).copied()?;
        self.at += 1;
        Some(c)
    }

    /// `getnum`: a decimal number at the cursor, else `default`.
    fn num(&mut self, default: i64) -> Result<i64, Fail> {
        if !self.bytes.get(self.at).is_some_and(u8::is_ascii_digit) {
            return Ok(default);
        }
        let mut a: i64 = 0;
        while let Some(&c) = self.bytes.get(self.at).filter(|c| c.is_ascii_digit()) {
            let d = i64::from(c - b'0');
            if a > i64::from(i32::MAX) / 10 || a * 10 > i64::from(i32::MAX) - d {
                return Err(Fail::error("integral size overflow"));
            }
            a = a * 10 + d;
            self.at += 1;
        }
        Ok(a)
    }

    /// `optsize`: the size of option `opt` (reading its number if any).
    fn size(&mut self, opt: u8) -> Result<usize, Fail> {
        Ok(match opt {
            b'B' | b'b' => 1,
            b'H' | b'h' => 2,
            b'L' | b'l' | b'T' | b'd' => 8,
            b'f' => 4,
            b'x' => 1,
            b'c' => self.num(1)? as usize,
            b'i' | b'I' => {
                let sz = self.num(4)?;
                if sz > MAXINTSIZE {
                    return Err(Fail::error(format!(
                        "integral size {sz} is larger than limit of {MAXINTSIZE}"
                    )));
                }
                sz as usize
            }
            _ => 0,
        })
    }

    /// `controloptions`: endianness, alignment, blanks; anything else fails.
    fn control(&mut self, opt: u8, h: &mut Header) -> Result<(), Fail> {
        match opt {
            b' ' => {}
            b'>' => h.little = false,
            b'<' => h.little = true,
            b'!' => {
                let a = self.num(MAXALIGN)?;
                if a <= 0 || a & (a - 1) != 0 {
                    return Err(Fail::error(format!("alignment {a} is not a power of 2")));
                }
                h.align = a as usize;
            }
            c => {
                let mut msg = b"invalid format option '".to_vec();
                msg.extend_from_slice(&[c, b'\'']);
                return Err(Fail::Arg(1, msg));
            }
        }
        Ok(())
    }
}

/// `gettoalign`: padding before an item of `size` at offset `len`.
fn to_align(len: usize, h: &Header, opt: u8, size: usize) -> usize {
    if size == 0 || opt == b'c' {
        return 0;
    }
    let size = size.min(h.align);
    (size.wrapping_sub(len & size.wrapping_sub(1))) & size.wrapping_sub(1)
}

fn is_int_opt(opt: u8) -> bool {
    matches!(
        opt,
        b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I'
    )
}

fn pack(lua: &Lua, a: Args) -> Ret {
    let mut fmt = Fmt {
        bytes: format(lua, &a)?,
        at: 0,
    };
    let mut h = Header::default();
    let mut arg = 2;
    let mut out: Vec<u8> = Vec::new();
    let mut total = 0usize;
    while let Some(opt) = fmt.next() {
        let mut size = fmt.size(opt)?;
        let pad = to_align(total, &h, opt, size);
        total += pad;
        out.resize(out.len() + pad, 0);
        match opt {
            o if is_int_opt(o) => {
                let n = a.number(lua, arg)?;
                arg += 1;
                let mut value = if n < 0.0 {
                    double_to_i64(n) as u64
                } else {
                    double_to_u64(n)
                };
                let mut buf = vec![0u8; size];
                let mut put = |slot: &mut u8| {
                    *slot = value as u8;
                    value >>= 8;
                };
                if h.little {
                    buf.iter_mut().for_each(&mut put);
                } else {
                    buf.iter_mut().rev().for_each(&mut put);
                }
                out.extend_from_slice(&buf);
            }
            b'x' => out.push(0),
            b'f' => {
                let f = a.number(lua, arg)? as f32;
                arg += 1;
                out.extend_from_slice(&if h.little {
                    f.to_le_bytes()
                } else {
                    f.to_be_bytes()
                });
            }
            b'd' => {
                let d = a.number(lua, arg)?;
                arg += 1;
                out.extend_from_slice(&if h.little {
                    d.to_le_bytes()
                } else {
                    d.to_be_bytes()
                });
            }
            b'c' | b's' => {
                let s = a.bytes(lua, arg)?;
                arg += 1;
                if size == 0 {
                    size = s.len();
                }
                if s.len() < size {
                    return Err(Fail::arg(arg as i64, "string too short"));
                }
                out.extend_from_slice(&s[..size]);
                if opt == b's' {
                    out.push(0);
                    size += 1;
                }
            }
            o => fmt.control(o, &mut h)?,
        }
        total += size;
    }
    Ok(multi([lstr(lua, out)?]))
}

fn get_integer(bytes: &[u8], little: bool, signed: bool) -> f64 {
    let fold = |acc: u64, &b: &u8| (acc << 8) | u64::from(b);
    let l = if little {
        bytes.iter().rev().fold(0, fold)
    } else {
        bytes.iter().fold(0, fold)
    };
    if !signed {
        return l as f64;
    }
    let shift = (bytes.len() as i64 * 8 - 1) as u32;
    let mask = u64::MAX.wrapping_shl(shift);
    let l = if l & mask != 0 { l | mask } else { l };
    l as i64 as f64
}

fn unpack(lua: &Lua, a: Args) -> Ret {
    let mut fmt = Fmt {
        bytes: format(lua, &a)?,
        at: 0,
    };
    let data = a.bytes(lua, 2)?;
    let ld = data.len();
    let start = a.opt_integer(lua, 3, 1)?;
    if start == 0 {
        return Err(Fail::arg(3, "offset must be 1 or greater"));
    }
    let mut pos = (start as usize).wrapping_sub(1);
    let mut h = Header::default();
    let mut out = super::Results::new(lua)?;
    let too_short = || Fail::arg(2, "data string too short");
    while let Some(opt) = fmt.next() {
        let mut size = fmt.size(opt)?;
        pos = pos.wrapping_add(to_align(pos, &h, opt, size));
        if !(size <= ld && pos <= ld - size) {
            return Err(too_short());
        }
        if 2 + out.len() + 2 > MAX_C_STACK {
            return Err(Fail::error("stack overflow (too many results)"));
        }
        match opt {
            o if is_int_opt(o) => {
                let v = get_integer(&data[pos..pos + size], h.little, o.is_ascii_lowercase());
                out.push(Value::Number(v))?;
            }
            b'x' => {}
            b'f' => {
                let b: [u8; 4] = data[pos..pos + 4].try_into().unwrap_or_default();
                let f = if h.little {
                    f32::from_le_bytes(b)
                } else {
                    f32::from_be_bytes(b)
                };
                out.push(Value::Number(f64::from(f)))?;
            }
            b'd' => {
                let b: [u8; 8] = data[pos..pos + 8].try_into().unwrap_or_default();
                let d = if h.little {
                    f64::from_le_bytes(b)
                } else {
                    f64::from_be_bytes(b)
                };
                out.push(Value::Number(d))?;
            }
            b'c' => {
                if size == 0 {
                    let prev = if out.len() == 0 {
                        None
                    } else {
                        to_number(lua, &out.last()?)
                    };
                    let Some(n) = prev else {
                        return Err(Fail::error("format 'c0' needs a previous size"));
                    };
                    size = if n < 0.0 {
                        double_to_i64(n) as usize
                    } else {
                        double_to_u64(n) as usize
                    };
                    out.pop()?;
                    if !(size <= ld && pos <= ld - size) {
                        return Err(too_short());
                    }
                }
                out.push(lstr(lua, &data[pos..pos + size])?)?;
            }
            b's' => {
                let Some(end) = data[pos..].iter().position(|&c| c == 0) else {
                    return Err(Fail::error("unfinished string in data"));
                };
                out.push(lstr(lua, &data[pos..pos + end])?)?;
                size = end + 1;
            }
            o => fmt.control(o, &mut h)?,
        }
        pos = pos.wrapping_add(size);
    }
    out.push(Value::Integer(pos.wrapping_add(1) as i64))?;
    out.finish()
}

fn size(lua: &Lua, a: Args) -> Ret {
    let mut fmt = Fmt {
        bytes: format(lua, &a)?,
        at: 0,
    };
    let mut h = Header::default();
    let mut pos = 0usize;
    while let Some(opt) = fmt.next() {
        let size = fmt.size(opt)?;
        pos = pos.wrapping_add(to_align(pos, &h, opt, size));
        if opt == b's' {
            return Err(Fail::arg(1, "option 's' has no fixed size"));
        }
        if opt == b'c' && size == 0 {
            return Err(Fail::arg(1, "option 'c0' has no fixed size"));
        }
        if !opt.is_ascii_alphanumeric() {
            fmt.control(opt, &mut h)?;
        }
        pos = pos.wrapping_add(size);
    }
    Ok(multi([Value::Integer(pos as i64)]))
}
