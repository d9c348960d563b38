//! Topic ids: random, never all zeros (Kafka reserves the zero id).

/// A fresh topic id.
pub fn random_topic_id() -> [u8; 16] {
    let mut id: [u8; 16] = rand::random();
    if id == [0; 16] {
        id[15] = 1;
    }
    id
}
