//! Bad input on the wire: garbage, truncated frames, absurd lengths, unknown
//! APIs and versions. Each gets a Kafka error or a closed connection; the
//! broker and its other connections carry on and the data on disk is intact.

use rill_tests::kafka::{consume_all, create_topic, produce_all, producer};
use rill_tests::raw::{answer_or_close, Answer};
use rill_tests::{data_dir, Broker};
use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

const RILL: &str = env!("CARGO_BIN_EXE_rill");

fn connect(broker: &Broker) -> TcpStream {
    let s = TcpStream::connect(broker.addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    s
}

/// Reads one response frame, or None when the broker closed the connection
/// (a read timeout, a hang, fails the test: it is neither).
fn read_frame(s: &mut TcpStream) -> Option<Vec<u8>> {
    match answer_or_close(s) {
        Answer::Frame(body) => Some(body),
        Answer::Closed => None,
    }
}

/// A request frame: header v1 (api key, version, correlation id, client id) + body.
fn request(api_key: i16, version: i16, correlation_id: i32, body: &[u8]) -> Vec<u8> {
    let mut payload = Vec::new();
    payload.extend_from_slice(&api_key.to_be_bytes());
    payload.extend_from_slice(&version.to_be_bytes());
    payload.extend_from_slice(&correlation_id.to_be_bytes());
    payload.extend_from_slice(&4i16.to_be_bytes());
    payload.extend_from_slice(b"test");
    payload.extend_from_slice(body);
    let mut frame = (payload.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&payload);
    frame
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_frames_never_hurt_the_broker() {
    let dir = data_dir();
    let mut broker = Broker::start(RILL, dir.path(), &[]);
    create_topic(&broker.bootstrap(), "safe", 1, &[]).await;
    let p = producer(&broker.bootstrap(), &[("acks", "all")]);
    let records: Vec<_> = (0..50)
        .map(|i| (None, format!("safe-{i}").into_bytes()))
        .collect();
    produce_all(&p, "safe", &records, None).await;

    // 1. Garbage bytes: a huge "length" then noise → closed.
    let mut s = connect(&broker);
    s.write_all(&[0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8])
        .expect("write");
    assert!(
        read_frame(&mut s).is_none(),
        "garbage closes the connection"
    );

    // 2. A 2 GiB frame length → closed without allocating it.
    let mut s = connect(&broker);
    s.write_all(&(i32::MAX).to_be_bytes()).expect("write");
    assert!(
        read_frame(&mut s).is_none(),
        "oversize frame closes the connection"
    );

    // 3. A negative frame length → closed.
    let mut s = connect(&broker);
    s.write_all(&(-5i32).to_be_bytes()).expect("write");
    assert!(read_frame(&mut s).is_none());

    // 4. A truncated frame, then the client goes away: nothing to answer.
    let mut s = connect(&broker);
    s.write_all(&100i32.to_be_bytes()).expect("write");
    s.write_all(&[0, 18, 0, 3]).expect("write");
    drop(s);

    // 5. An unknown API key → the connection is closed (Kafka does the same).
    let mut s = connect(&broker);
    s.write_all(&request(9_999, 0, 7, &[])).expect("write");
    assert!(read_frame(&mut s).is_none(), "unknown api closes");

    // 6. ApiVersions at a version from the future → UNSUPPORTED_VERSION (35) in a v0 body.
    let mut s = connect(&broker);
    s.write_all(&request(18, 99, 42, &[])).expect("write");
    let body = read_frame(&mut s).expect("an answer");
    assert_eq!(&body[..4], &42i32.to_be_bytes(), "correlation id");
    assert_eq!(&body[4..6], &35i16.to_be_bytes(), "UNSUPPORTED_VERSION");

    // 7. Metadata v1 with a body that does not decode (topic count 1000, no topics).
    let mut s = connect(&broker);
    s.write_all(&request(3, 1, 8, &1000i32.to_be_bytes()))
        .expect("write");
    assert!(read_frame(&mut s).is_none(), "an undecodable body closes");

    // 8. Arrays declaring ~2^31 elements in a few bytes (found by the
    //    `request_frame` fuzz target, docs/fuzzing.md): the decoder sized
    //    its vector from the count and the failed allocation aborted the
    //    process. Now a decode error → closed. DeleteRecords v1 and
    //    Metadata v1, i32::MAX topics; Fetch v12 (flexible header v2: an
    //    empty tag buffer first), u32::MAX - 1 topics in a compact array.
    for frame in [
        request(21, 1, 9, &i32::MAX.to_be_bytes()),
        request(3, 1, 10, &i32::MAX.to_be_bytes()),
        request(
            1,
            12,
            11,
            &[
                &[0u8][..],                      // header tagged fields
                &[0xff; 4],                      // replica id
                &[0, 0, 0, 0],                   // max wait
                &[0, 0, 0, 1],                   // min bytes
                &[0, 0, 0, 1],                   // max bytes
                &[0],                            // isolation level
                &[0, 0, 0, 0],                   // session id
                &[0xff; 4],                      // session epoch
                &[0xff, 0xff, 0xff, 0xff, 0x0f], // topics: compact length
            ]
            .concat(),
        ),
    ] {
        let mut s = connect(&broker);
        s.write_all(&frame).expect("write");
        assert!(read_frame(&mut s).is_none(), "an impossible array closes");
        assert!(broker.is_running(), "broker alive:\n{}", broker.log());
    }

    // The broker still serves, and the data is intact.
    assert!(broker.is_running(), "broker alive:\n{}", broker.log());
    let got = consume_all(
        &broker.bootstrap(),
        "safe",
        1,
        50,
        Duration::from_secs(20),
        &[],
    );
    assert_eq!(got.len(), 50);
    assert!(got
        .iter()
        .enumerate()
        .all(|(i, r)| r.offset == i as i64
            && r.value.as_deref() == Some(format!("safe-{i}").as_bytes())));
}
