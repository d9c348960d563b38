//! Transactions on a real log: the last stable offset, `read_committed`
//! reads and their aborted-transaction lists, the `.txnindex` file, and all
//! of it across restart and truncation.

mod common;

use common::*;
use engine::batch::{BatchBuilder, Compression};
use engine::log::ReadMode;
use engine::{FlushPolicy, PartitionLog, ReadData, TopicConfig};

fn tempdir() -> tempfile::TempDir {
    // Not /tmp: tmpfs has no O_DIRECT.
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

const A: i64 = 100;
const B: i64 = 200;

/// A transactional batch of `count` records.
fn txn_batch(producer_id: i64, sequence: i32, count: usize) -> Vec<u8> {
    let mut builder =
        BatchBuilder::new(0, Compression::None).producer(producer_id, 0, sequence, true);
    for i in 0..count {
        let key = format!("p{producer_id}-s{}", sequence as usize + i);
        builder.push(i as i32, 1_000, Some(key.as_bytes()), Some(b"v"), &[]);
    }
    builder.build().unwrap()
}

async fn append(log: &PartitionLog, mut bytes: Vec<u8>) -> (i64, i64) {
    let r = log.append(&mut bytes, 0).unwrap();
    log.wait_durable(r.last_offset).await.unwrap();
    (r.base_offset, r.last_offset)
}

async fn marker(log: &PartitionLog, producer_id: i64, commit: bool) -> i64 {
    let r = log.append_control(producer_id, 0, commit, 5).unwrap();
    assert_eq!(r.base_offset, r.last_offset, "a marker is one record");
    log.wait_durable(r.last_offset).await.unwrap();
    r.base_offset
}

/// What `read_committed` returns from `offset` on, read to its end: the
/// offsets of the data records (control batches left out), and the aborted
/// transactions of every answer.
async fn read_committed_all(
    log: &PartitionLog,
    mut offset: i64,
    mode: ReadMode,
) -> (Vec<i64>, Vec<(i64, i64)>) {
    let mut offsets = Vec::new();
    let mut aborted = Vec::new();
    loop {
        let result = log.read_committed(offset, 150, mode).await.unwrap();
        assert!(result.last_stable_offset <= result.high_watermark);
        aborted.extend(
            result
                .aborted_transactions
                .expect("read_committed lists aborts"),
        );
        let bytes = match result.data {
            ReadData::Empty => break,
            ReadData::Bytes(bytes) => bytes.to_vec(),
            ReadData::Pieces(pieces) => pieces.concat(),
            ReadData::File(slice) => {
                let mut buf = vec![0u8; slice.length];
                std::os::unix::fs::FileExt::read_exact_at(&*slice.file, &mut buf, slice.position)
                    .unwrap();
                buf
            }
        };
        for item in engine::batch::batches(&bytes) {
            let (header, range) = item.unwrap();
            assert!(
                header.last_offset() < result.last_stable_offset,
                "nothing at or past the LSO"
            );
            if !header.is_control() {
                for record in engine::batch::records(&bytes[range]).unwrap() {
                    offsets.push(header.base_offset + i64::from(record.offset_delta));
                }
            }
            offset = header.last_offset() + 1;
        }
    }
    aborted.sort();
    aborted.dedup();
    (offsets, aborted)
}

fn txnindex_files(dir: &std::path::Path) -> Vec<(String, usize)> {
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".txnindex"))
        .map(|e| {
            (
                e.file_name().into_string().unwrap(),
                e.metadata().unwrap().len() as usize,
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn interleaved_transactions_read_committed_and_restart() {
    let dir = tempdir();
    let path = dir.path().to_path_buf();
    let p = path.clone();
    run(async move {
        let (m, log) = open_log(config(&p, FlushPolicy::Fsync), "t", TopicConfig::default()).await;
        assert_eq!(append(&log, txn_batch(A, 0, 2)).await, (0, 1));
        assert_eq!(append(&log, txn_batch(B, 0, 2)).await, (2, 3));
        assert_eq!(append(&log, txn_batch(A, 2, 1)).await, (4, 4));
        assert_eq!(append(&log, batch(0, 1, 1_000)).await, (5, 5));
        assert_eq!(log.high_watermark(), 6);
        assert_eq!(
            log.last_stable_offset(),
            0,
            "A's open transaction holds the LSO"
        );
        assert_eq!(log.latest_offset(true), 0);
        assert_eq!(log.latest_offset(false), 6);
        assert_eq!(
            log.offset_for_timestamp_isolated(-1, true).await.unwrap(),
            Some((0, -1))
        );
        assert_eq!(log.open_transactions(), vec![(A, 0), (B, 2)]);
        let (offsets, aborted) = read_committed_all(&log, 0, ReadMode::Copy).await;
        assert!(offsets.is_empty() && aborted.is_empty());
        // The uncommitted read sees everything and reports the LSO.
        let r = log.read(0, 1 << 20, ReadMode::Copy).await.unwrap();
        assert_eq!((r.last_stable_offset, r.aborted_transactions), (0, None));

        // A commits: the LSO moves to B's first offset.
        assert_eq!(marker(&log, A, true).await, 6);
        assert_eq!(log.last_stable_offset(), 2);
        let (offsets, aborted) = read_committed_all(&log, 0, ReadMode::Copy).await;
        assert_eq!((offsets, aborted), (vec![0, 1], vec![]));

        // B writes more and aborts: everything is stable.
        assert_eq!(append(&log, txn_batch(B, 2, 1)).await, (7, 7));
        assert_eq!(marker(&log, B, false).await, 8);
        assert_eq!(log.last_stable_offset(), 9);
        assert_eq!(log.high_watermark(), 9);
        for mode in [
            ReadMode::Copy,
            ReadMode::FileSlice,
            ReadMode::CachedPiecesOrCopy,
        ] {
            let (offsets, aborted) = read_committed_all(&log, 0, mode).await;
            assert_eq!(offsets, vec![0, 1, 2, 3, 4, 5, 7], "{mode:?}");
            assert_eq!(aborted, vec![(B, 2)], "{mode:?}");
        }
        // From past B's marker, B's abort is out of range; from inside, in range.
        assert_eq!(read_committed_all(&log, 9, ReadMode::Copy).await.1, vec![]);
        assert_eq!(
            read_committed_all(&log, 7, ReadMode::Copy).await.1,
            vec![(B, 2)]
        );
        // A one-batch answer from offset 0 ends before B's first offset: no
        // abort listed (a file range finds its end from the batch headers).
        for mode in [ReadMode::Copy, ReadMode::FileSlice] {
            let first = log.read_committed(0, 1, mode).await.unwrap();
            assert_eq!(first.aborted_transactions, Some(vec![]), "{mode:?}");
        }
        // Up to B's first batch: its abort is listed, from either.
        for mode in [ReadMode::Copy, ReadMode::FileSlice] {
            let read = log.read_committed(2, 1, mode).await.unwrap();
            assert_eq!(read.aborted_transactions, Some(vec![(B, 2)]), "{mode:?}");
        }

        // A opens a second transaction, then the broker restarts.
        assert_eq!(append(&log, txn_batch(A, 3, 2)).await, (9, 10));
        assert_eq!(log.last_stable_offset(), 9);
        m.shutdown().await.unwrap();
    });
    let p = path.clone();
    run(async move {
        let (m, log) = open_log(config(&p, FlushPolicy::Fsync), "t", TopicConfig::default()).await;
        assert_eq!(log.high_watermark(), 11);
        assert_eq!(
            log.last_stable_offset(),
            9,
            "the open transaction survives the restart"
        );
        assert_eq!(log.open_transactions(), vec![(A, 9)]);
        let (offsets, aborted) = read_committed_all(&log, 0, ReadMode::Copy).await;
        assert_eq!(
            (offsets, aborted),
            (vec![0, 1, 2, 3, 4, 5, 7], vec![(B, 2)])
        );
        // A aborts the second transaction.
        assert_eq!(marker(&log, A, false).await, 11);
        assert_eq!(log.last_stable_offset(), 12);
        let (offsets, aborted) = read_committed_all(&log, 0, ReadMode::Copy).await;
        assert_eq!(offsets, vec![0, 1, 2, 3, 4, 5, 7, 9, 10]);
        assert_eq!(aborted, vec![(A, 9), (B, 2)]);
        assert_eq!(
            read_committed_all(&log, 9, ReadMode::Copy).await.1,
            vec![(A, 9)]
        );
        let index = log.aborted_transactions();
        assert_eq!(index.len(), 2);
        assert_eq!(
            (
                index[0].producer_id,
                index[0].first_offset,
                index[0].last_offset
            ),
            (B, 2, 8)
        );
        assert_eq!(
            (
                index[1].producer_id,
                index[1].first_offset,
                index[1].last_offset
            ),
            (A, 9, 11)
        );
        log.checkpoint_producer_state().unwrap();
        m.shutdown().await.unwrap();
    });
    // The segment's .txnindex holds both aborts, in Kafka's 34-byte entries.
    let files = txnindex_files(&path.join("t-0"));
    assert_eq!(files, vec![(format!("{:020}.txnindex", 0), 2 * 34)]);
    let p = path.clone();
    run(async move {
        let (_m, log) = open_log(config(&p, FlushPolicy::Fsync), "t", TopicConfig::default()).await;
        assert_eq!(log.last_stable_offset(), 12);
        assert_eq!(log.aborted_transactions().len(), 2);
        // Fenced: an older producer epoch, an older coordinator epoch.
        assert_eq!(
            log.append_control(A, -1, true, 5)
                .unwrap_err()
                .error_code()
                .code(),
            47
        );
        assert_eq!(
            log.append_control(A, 0, true, 4)
                .unwrap_err()
                .error_code()
                .code(),
            52
        );
        // A client may not write markers itself.
        let mut builder = BatchBuilder::new(0, Compression::None)
            .producer(A, 0, -1, true)
            .control(true);
        builder.push(
            0,
            1_000,
            Some(&[0, 0, 0, 1]),
            Some(&[0, 0, 0, 0, 0, 5]),
            &[],
        );
        let mut forged = builder.build().unwrap();
        assert_eq!(
            log.append(&mut forged, 0).unwrap_err().error_code().code(),
            87
        );
    });
}

#[test]
fn rebuild_without_snapshots_across_segments_and_truncation() {
    let dir = tempdir();
    let path = dir.path().to_path_buf();
    let topic = TopicConfig::default()
        .with_overrides([("segment.bytes", "600")])
        .unwrap();
    let p = path.clone();
    let t = topic.clone();
    run(async move {
        let (m, log) = open_log(config(&p, FlushPolicy::Fsync), "t", t).await;
        // Ten rounds: A commits, B aborts; each round spans segments.
        let mut expected_aborts = Vec::new();
        for round in 0..10 {
            let (a_first, _) = append(&log, txn_batch(A, round * 2, 2)).await;
            let (b_first, _) = append(&log, txn_batch(B, round * 2, 2)).await;
            marker(&log, A, true).await;
            marker(&log, B, false).await;
            let _ = a_first;
            expected_aborts.push((B, b_first));
        }
        // B opens one more transaction and stays open.
        let (open_first, _) = append(&log, txn_batch(B, 20, 2)).await;
        assert!(log.segment_count() > 3, "segments {}", log.segment_count());
        assert_eq!(log.last_stable_offset(), open_first);
        let (_, aborted) = read_committed_all(&log, 0, ReadMode::Copy).await;
        assert_eq!(aborted, expected_aborts);
        m.shutdown().await.unwrap();
    });
    let partition_dir = path.join("t-0");
    assert!(
        !txnindex_files(&partition_dir).is_empty(),
        "segments with an abort have a .txnindex"
    );
    for entry in std::fs::read_dir(&partition_dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".snapshot") || name.ends_with(".txnindex") {
            std::fs::remove_file(partition_dir.join(name)).unwrap();
        }
    }
    let p = path.clone();
    run(async move {
        let (_m, log) = open_log(config(&p, FlushPolicy::Fsync), "t", topic).await;
        let end = log.log_end_offset();
        let open_first = end - 2;
        assert_eq!(
            log.last_stable_offset(),
            open_first,
            "rebuilt from the log alone"
        );
        assert_eq!(log.open_transactions(), vec![(B, open_first)]);
        let all = log.aborted_transactions();
        assert_eq!(all.len(), 10);
        // Every abort is in the segment of its marker, and rewritten there.
        let files = txnindex_files(log.dir());
        assert_eq!(files.iter().map(|f| f.1).sum::<usize>(), 10 * 34);
        // Cut at the last abort marker: B's last aborted transaction is open again.
        let last = all[9];
        log.truncate_to(last.last_offset).await.unwrap();
        assert_eq!(log.log_end_offset(), last.last_offset);
        assert_eq!(log.aborted_transactions().len(), 9);
        assert_eq!(log.open_transactions(), vec![(B, last.first_offset)]);
        assert_eq!(log.last_stable_offset(), last.first_offset);
        // B aborts it again: the index has ten entries again.
        let again = marker(&log, B, false).await;
        assert_eq!(again, last.last_offset);
        assert_eq!(log.aborted_transactions().len(), 10);
        assert_eq!(log.last_stable_offset(), log.high_watermark());
        // Cut where B's last transaction began: that cuts A's commit marker
        // of the same round too, so A's transaction of that round is open.
        log.truncate_to(last.first_offset).await.unwrap();
        let open = log.open_transactions();
        assert_eq!(open.len(), 1);
        assert_eq!(open[0].0, A);
        assert!(open[0].1 < last.first_offset);
        assert_eq!(log.aborted_transactions().len(), 9);
        assert_eq!(log.last_stable_offset(), open[0].1);
        // A commits it: nothing open any more.
        marker(&log, A, true).await;
        assert!(log.open_transactions().is_empty());
        assert_eq!(log.last_stable_offset(), log.high_watermark());
    });
}
