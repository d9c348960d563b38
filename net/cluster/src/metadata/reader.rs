//! A bounds-checked big-endian reader over bytes, shared by the record codec
//! and the snapshot decoder: each reads its own format on top of it and
//! names truncation with its own error (`E`), so that decoding bad bytes
//! never panics and always says where it stopped.

/// Reads fields from `buf`, from position `at`.
pub(super) struct Reader<'a, E> {
    pub(super) buf: &'a [u8],
    pub(super) at: usize,
    /// Builds the error for a field of `needed` bytes at `at` with
    /// `available` bytes left.
    truncated: fn(usize, usize, usize) -> E,
}

impl<'a, E> Reader<'a, E> {
    /// A reader of `buf` from `at`.
    pub(super) fn new(buf: &'a [u8], at: usize, truncated: fn(usize, usize, usize) -> E) -> Self {
        Reader { buf, at, truncated }
    }

    /// The error for a field of `needed` bytes here.
    pub(super) fn truncated(&self, needed: usize) -> E {
        (self.truncated)(self.at, needed, self.buf.len().saturating_sub(self.at))
    }

    /// The next `needed` bytes.
    pub(super) fn take(&mut self, needed: usize) -> Result<&'a [u8], E> {
        let end = self
            .at
            .checked_add(needed)
            .filter(|&end| end <= self.buf.len())
            .ok_or_else(|| self.truncated(needed))?;
        let bytes = &self.buf[self.at..end];
        self.at = end;
        Ok(bytes)
    }

    pub(super) fn array<const N: usize>(&mut self) -> Result<[u8; N], E> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    pub(super) fn u8(&mut self) -> Result<u8, E> {
        Ok(self.array::<1>()?[0])
    }

    pub(super) fn u16(&mut self) -> Result<u16, E> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    pub(super) fn u32(&mut self) -> Result<u32, E> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    pub(super) fn i32(&mut self) -> Result<i32, E> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    pub(super) fn i64(&mut self) -> Result<i64, E> {
        Ok(i64::from_be_bytes(self.array()?))
    }

    /// A list count, refused when `count` items of at least `min_item_bytes`
    /// each cannot fit in what is left (so a damaged count never makes us
    /// reserve gigabytes).
    pub(super) fn count(&mut self, min_item_bytes: usize) -> Result<usize, E> {
        let count = usize::try_from(self.u32()?).unwrap_or(usize::MAX);
        let needed = count.saturating_mul(min_item_bytes.max(1));
        if needed > self.buf.len() - self.at {
            return Err(self.truncated(needed));
        }
        Ok(count)
    }
}
