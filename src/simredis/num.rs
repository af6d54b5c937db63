//! Number parsing and formatting exactly as Redis and its Lua do it.

/// Redis's `string2ll`: the strict integer syntax every integer argument must have.
///
/// Why so strict: Redis rejects `+1`, ` 1`, `01`, `-0` and `1.0` with
/// `ERR value is not an integer or out of range` (measured), and a lock whose TTL argument is
/// accepted by the simulator but refused by real Redis would pass in simulation only.
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (neg, digits) = match s[0] {
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    let mut v: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
    }
    if neg {
        if v > (i64::MAX as u64) + 1 {
            None
        } else {
            Some((v as i64).wrapping_neg())
        }
    } else if v > i64::MAX as u64 {
        None
    } else {
        Some(v as i64)
    }
}

/// C's `printf("%.17g", x)`: how Redis 7.0 turns a Lua number argument of `redis.call` into a
/// string (measured: `0.1` becomes `0.10000000000000001`, `1e20` becomes `1e+20`).
pub fn fmt_g17(x: f64) -> String {
    fmt_g(x, 17)
}

/// C's `printf("%.14g", x)`: Lua 5.1's `tostring` of a number.
pub fn fmt_g14(x: f64) -> String {
    fmt_g(x, 14)
}

fn fmt_g(x: f64, precision: usize) -> String {
    if x.is_nan() {
        // glibc prints the sign of a NaN; Lua's 0/0 is negative on x86.
        return if x.is_sign_negative() { "-nan" } else { "nan" }.to_string();
    }
    if x.is_infinite() {
        return if x < 0.0 { "-inf" } else { "inf" }.to_string();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    // Round to `precision` significant digits first; the exponent of the rounded value
    // decides between fixed and scientific notation, as C's %g does.
    let sci = format!("{:.*e}", precision - 1, x);
    let (mantissa, exp) = sci.split_once('e').expect("scientific format");
    let exp: i32 = exp.parse().expect("exponent");
    if exp < -4 || exp >= precision as i32 {
        let mantissa = strip_zeros(mantissa);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    } else {
        let decimals = (precision as i32 - 1 - exp).max(0) as usize;
        strip_zeros(&format!("{:.*}", decimals, x)).to_string()
    }
}

fn strip_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// C's `(long long)` cast of a Lua number, which is how Redis turns a returned number into an
/// integer reply: truncation toward zero, and on x86 the "integer indefinite" value
/// `i64::MIN` for NaN and out-of-range values (measured: `return 1e300` gives
/// -9223372036854775808). Rust's `as` saturates instead, so it is not used directly.
pub fn lua_number_to_i64(n: f64) -> i64 {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0; // 2^63, exact in f64
    if !(-TWO_63..TWO_63).contains(&n) {
        i64::MIN
    } else {
        n as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_integers() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        for bad in [
            &b"9223372036854775808"[..],
            b"-0",
            b"01",
            b"+1",
            b" 1",
            b"1.5",
            b"",
            b"-",
        ] {
            assert_eq!(parse_i64(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn g17_matches_redis() {
        assert_eq!(fmt_g17(3.5), "3.5");
        assert_eq!(fmt_g17(0.1), "0.10000000000000001");
        assert_eq!(fmt_g17(1e20), "1e+20");
        assert_eq!(fmt_g17(1.0 / 3.0), "0.33333333333333331");
        assert_eq!(fmt_g17(123456789012345678.0), "1.2345678901234568e+17");
        assert_eq!(fmt_g17(12345678901234567890.0), "1.2345678901234567e+19");
        assert_eq!(fmt_g17(9007199254740992.0), "9007199254740992");
        assert_eq!(fmt_g17(100.0), "100");
        assert_eq!(fmt_g17(-0.0), "-0");
        assert_eq!(fmt_g17(f64::INFINITY), "inf");
        assert_eq!(fmt_g17(0.0001), "0.0001");
        assert_eq!(fmt_g17(0.00001), "1.0000000000000001e-05");
        assert_eq!(fmt_g14(0.1), "0.1");
        assert_eq!(fmt_g14(1e15), "1e+15");
        assert_eq!(fmt_g14(5.0), "5");
    }

    #[test]
    fn c_cast() {
        assert_eq!(lua_number_to_i64(3.7), 3);
        assert_eq!(lua_number_to_i64(-3.7), -3);
        assert_eq!(lua_number_to_i64(1e300), i64::MIN);
        assert_eq!(lua_number_to_i64(f64::NAN), i64::MIN);
        assert_eq!(
            lua_number_to_i64(4611686018427387904.0),
            4611686018427387904
        );
    }
}
