//! Kafka's zigzag varints (protobuf encoding): `varint` for i32 (at most 5
//! bytes), `varlong` for i64 (at most 10 bytes).
//!
//! Decoding mirrors Kafka's `ByteUtils`: a continuation bit past the last
//! allowed byte is an error; surplus high bits in the last byte are dropped.

use super::error::BatchError;

const MAX_VARINT_BYTES: usize = 5;
pub(crate) const MAX_VARLONG_BYTES: usize = 10;

/// An unsigned base-128 number of at most `max_bytes` bytes at `*position`,
/// or `None` when it runs past the end of `buf` or past `max_bytes`. An
/// `Option` stays in registers: the produce path's record walk
/// (`record_walk`) reads six of these per record.
#[inline(always)]
pub(crate) fn unsigned(buf: &[u8], position: &mut usize, max_bytes: usize) -> Option<u64> {
    let first = *buf.get(*position)?;
    *position += 1;
    if first < 0x80 {
        return Some(u64::from(first));
    }
    let mut value = u64::from(first & 0x7f);
    for index in 1..max_bytes {
        let byte = *buf.get(*position)?;
        *position += 1;
        // Shift is at most 63; bits shifted past 64 are dropped like Kafka does.
        value |= u64::from(byte & 0x7f) << (7 * index);
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

/// A zigzag varint (i32), or `None` as [`unsigned`] says.
#[inline(always)]
pub(crate) fn varint(buf: &[u8], position: &mut usize) -> Option<i32> {
    let raw = unsigned(buf, position, MAX_VARINT_BYTES)? as u32;
    Some(((raw >> 1) as i32) ^ -((raw & 1) as i32))
}

/// Read an unsigned base-128 number of at most `max_bytes` bytes at `*position`.
fn read_unsigned(buf: &[u8], position: &mut usize, max_bytes: usize) -> Result<u64, BatchError> {
    let start = *position;
    unsigned(buf, position, max_bytes).ok_or(BatchError::InvalidRecord {
        // All `max_bytes` read and the last still said "more", or the end came first.
        reason: if *position == start + max_bytes {
            "varint is too long"
        } else {
            "varint runs past the end of the records"
        },
    })
}

/// Read a zigzag varint (i32).
pub fn read_varint(buf: &[u8], position: &mut usize) -> Result<i32, BatchError> {
    let raw = read_unsigned(buf, position, MAX_VARINT_BYTES)? as u32;
    Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32))
}

/// Read a zigzag varlong (i64).
pub fn read_varlong(buf: &[u8], position: &mut usize) -> Result<i64, BatchError> {
    let raw = read_unsigned(buf, position, MAX_VARLONG_BYTES)?;
    Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64))
}

fn write_unsigned(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Append a zigzag varint (i32).
pub fn write_varint(out: &mut Vec<u8>, value: i32) {
    write_unsigned(out, u64::from(((value << 1) ^ (value >> 31)) as u32));
}

/// Append a zigzag varlong (i64).
pub fn write_varlong(out: &mut Vec<u8>, value: i64) {
    write_unsigned(out, ((value << 1) ^ (value >> 63)) as u64);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn varint_bytes(value: i32) -> Vec<u8> {
        let mut out = Vec::new();
        write_varint(&mut out, value);
        out
    }

    #[test]
    fn known_encodings() {
        assert_eq!(varint_bytes(0), [0x00]);
        assert_eq!(varint_bytes(-1), [0x01]);
        assert_eq!(varint_bytes(1), [0x02]);
        assert_eq!(varint_bytes(63), [0x7e]);
        assert_eq!(varint_bytes(64), [0x80, 0x01]);
        assert_eq!(varint_bytes(i32::MAX), [0xfe, 0xff, 0xff, 0xff, 0x0f]);
        assert_eq!(varint_bytes(i32::MIN), [0xff, 0xff, 0xff, 0xff, 0x0f]);
    }

    #[test]
    fn round_trip_edges() {
        for value in [0, 1, -1, 63, -64, 64, 300, -300, i32::MAX, i32::MIN] {
            let bytes = varint_bytes(value);
            let mut position = 0;
            assert_eq!(read_varint(&bytes, &mut position), Ok(value));
            assert_eq!(position, bytes.len());
        }
        for value in [0i64, -1, 1 << 40, -(1 << 40), i64::MAX, i64::MIN] {
            let mut bytes = Vec::new();
            write_varlong(&mut bytes, value);
            assert!(bytes.len() <= 10);
            let mut position = 0;
            assert_eq!(read_varlong(&bytes, &mut position), Ok(value));
            assert_eq!(position, bytes.len());
        }
    }

    #[test]
    fn truncated_and_overlong_are_errors() {
        let mut position = 0;
        assert!(read_varint(&[0x80, 0x80], &mut position).is_err());
        let mut position = 0;
        assert!(read_varint(&[0x80; 6], &mut position).is_err());
        let mut position = 0;
        assert!(read_varlong(&[0xff; 11], &mut position).is_err());
        let mut position = 0;
        assert!(read_varint(&[], &mut position).is_err());
    }

    #[test]
    fn errors_say_whether_the_varint_ran_out_or_ran_long() {
        let reason = |bytes: &[u8]| match read_varint(bytes, &mut 0) {
            Err(BatchError::InvalidRecord { reason }) => reason,
            other => panic!("{bytes:?} gave {other:?}"),
        };
        assert_eq!(
            reason(&[0x80, 0x80]),
            "varint runs past the end of the records"
        );
        assert_eq!(reason(&[]), "varint runs past the end of the records");
        assert_eq!(reason(&[0x80; 5]), "varint is too long");
        assert_eq!(reason(&[0x80; 6]), "varint is too long");
    }
}
