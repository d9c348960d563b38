//! Chunk arithmetic of `get_range`: which chunks cover a byte range, and
//! the range cut back out of them. Pure.
//!
//! Chunk `i` of an object holds its bytes `i * chunk_bytes ..
//! (i + 1) * chunk_bytes`; the last chunk is shorter unless the object's
//! length is a multiple of `chunk_bytes`. A short chunk therefore tells the
//! object's length, which is how a range reaching past the end is found
//! without asking the store for the length first.

use bytes::{Bytes, BytesMut};
use std::ops::{Range, RangeInclusive};

/// The indexes of the chunks that cover a non-empty `range`.
pub(crate) fn covering(range: &Range<u64>, chunk_bytes: u64) -> RangeInclusive<u64> {
    assert!(range.start < range.end, "empty ranges read no chunk");
    assert!(chunk_bytes > 0);
    range.start / chunk_bytes..=(range.end - 1) / chunk_bytes
}

/// The bytes of the object that chunk `index` holds, when it is not the
/// last.
pub(crate) fn chunk_range(index: u64, chunk_bytes: u64) -> Range<u64> {
    let start = index.saturating_mul(chunk_bytes);
    start..start.saturating_add(chunk_bytes)
}

/// Cuts `range` out of `chunks`, the chunks `covering(range)` names, in
/// order from `first_index`. `Err(object_bytes)` when the range reaches
/// past the object's end, which a short chunk reveals.
pub(crate) fn assemble(
    range: &Range<u64>,
    chunk_bytes: u64,
    first_index: u64,
    chunks: &[Bytes],
) -> Result<Bytes, u64> {
    assert_eq!(
        chunks.len() as u64,
        covering(range, chunk_bytes).count() as u64,
        "one chunk per covering index"
    );
    for (offset, chunk) in chunks.iter().enumerate() {
        let length = chunk.len() as u64;
        assert!(length <= chunk_bytes, "a chunk larger than chunk_bytes");
        let start = chunk_range(first_index + offset as u64, chunk_bytes).start;
        let is_last = offset + 1 == chunks.len();
        if length < chunk_bytes && (!is_last || start + length < range.end) {
            return Err(start + length);
        }
    }
    let first_start = chunk_range(first_index, chunk_bytes).start;
    let from = usize::try_from(range.start - first_start).map_err(|_| range.start)?;
    if let [only] = chunks {
        let to = usize::try_from(range.end - first_start).map_err(|_| range.start)?;
        // One chunk: a view of it, no copy.
        return Ok(only.slice(from..to));
    }
    let length = usize::try_from(range.end - range.start).map_err(|_| range.start)?;
    let mut joined = BytesMut::with_capacity(length);
    let mut skip = from;
    for chunk in chunks {
        let wanted = (length - joined.len()).min(chunk.len() - skip);
        joined.extend_from_slice(&chunk[skip..skip + wanted]);
        skip = 0;
    }
    assert_eq!(joined.len(), length, "the chunks cover the range");
    Ok(joined.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An object of `length` bytes, byte `i` being `i % 251`, cut in chunks.
    fn object_chunks(length: u64, chunk_bytes: u64, range: &Range<u64>) -> Vec<Bytes> {
        covering(range, chunk_bytes)
            .map(|index| {
                let bytes = chunk_range(index, chunk_bytes);
                (bytes.start..bytes.end.min(length))
                    .map(|i| (i % 251) as u8)
                    .collect::<Vec<u8>>()
                    .into()
            })
            .collect()
    }

    fn expected(range: &Range<u64>) -> Bytes {
        range
            .clone()
            .map(|i| (i % 251) as u8)
            .collect::<Vec<_>>()
            .into()
    }

    #[test]
    fn covering_chunks_of_ranges() {
        assert_eq!(covering(&(0..1), 4), 0..=0);
        assert_eq!(covering(&(0..4), 4), 0..=0);
        assert_eq!(covering(&(3..5), 4), 0..=1);
        assert_eq!(covering(&(4..12), 4), 1..=2);
        assert_eq!(covering(&(5..13), 4), 1..=3);
    }

    #[test]
    fn a_range_spanning_chunks_is_reassembled() {
        for range in [0..1, 3..5, 4..12, 5..13, 0..30, 29..30, 7..8] {
            let chunks = object_chunks(30, 4, &range);
            let first = *covering(&range, 4).start();
            assert_eq!(
                assemble(&range, 4, first, &chunks),
                Ok(expected(&range)),
                "{range:?}"
            );
        }
    }

    #[test]
    fn a_range_past_the_end_reports_the_length() {
        // 30 bytes: the chunk 28..32 holds two.
        let range = 20..31;
        let chunks = object_chunks(30, 4, &range);
        assert_eq!(assemble(&range, 4, 5, &chunks), Err(30));
        // A short chunk before the last: the object ended inside the range.
        let short_early = vec![Bytes::from_static(b"ab"), Bytes::from_static(b"cdef")];
        assert_eq!(assemble(&(0..8), 4, 0, &short_early), Err(2));
        // An object ending exactly at a chunk's end serves up to it.
        let range = 26..28;
        let chunks = object_chunks(28, 4, &range);
        assert_eq!(assemble(&range, 4, 6, &chunks), Ok(expected(&range)));
    }
}
