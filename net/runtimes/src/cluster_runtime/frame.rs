//! The controller listener's frames: `[body length u32 BE][kind u8][body]`.

/// Frame kind: a Raft message (protobuf bytes).
pub const KIND_RAFT: u8 = 1;
/// Frame kind: a broker's request to the active controller.
pub const KIND_REQUEST: u8 = 2;
/// Frame kind: the controller's reply.
pub const KIND_REPLY: u8 = 3;
/// Frame kind: an observer's FetchMetadata (JSON; see `metadata_fetch`).
pub const KIND_FETCH_METADATA: u8 = 4;
/// Frame kind: a voter's answer to FetchMetadata (header and snapshot).
pub const KIND_METADATA: u8 = 5;

/// A frame of `kind` around `body`.
pub fn frame(kind: u8, body: &[u8]) -> Vec<u8> {
    let length = u32::try_from(body.len()).unwrap_or(u32::MAX);
    let mut out = Vec::with_capacity(body.len() + 5);
    out.extend_from_slice(&length.to_be_bytes());
    out.push(kind);
    out.extend_from_slice(body);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_is_length_kind_body() {
        let bytes = frame(KIND_REPLY, b"abc");
        assert_eq!(bytes, [0, 0, 0, 3, KIND_REPLY, b'a', b'b', b'c']);
    }
}
