//! The one owner-call primitive: run a request on the shard that owns it and
//! get its reply — directly when that is this shard, over the mesh otherwise.
//!
//! Every service uses it the same way: routing (partition work, long polls),
//! the topic controller, the group and transaction coordinators, the
//! producer-id allocator, the metrics scrape; replication and cluster
//! metadata will too. A service defines a request type, implements
//! [`OwnerCall`] for it (what the owner does), and calls
//! [`Shard::call`]`(owner, request)`. The mesh carries the request and a
//! reply slot in an [`Envelope`](crate::mesh::Envelope); nothing here or in
//! the mesh names a service.

use crate::error::RequestError;
use crate::mesh::Envelope;
use crate::shard::Shard;
use futures::channel::oneshot;
use futures::future::{select, Either};
use std::future::Future;
use std::rc::Rc;

/// A request that the owner shard answers.
pub trait OwnerCall<R: 'static>: Send + Sized + 'static {
    /// What the owner answers (crosses cores: `Send`).
    type Reply: Send + 'static;

    /// Whether the owner drops the work when the asker stops waiting for it.
    /// Only for work that changes nothing (a long poll); anything that
    /// persists must run to its end, or a half-made change would be left.
    const CANCEL_WHEN_ASKER_GONE: bool = false;

    /// Runs on the owner shard.
    fn run(self, shard: Rc<Shard<R>>) -> impl Future<Output = Self::Reply> + 'static;
}

impl<R: 'static> Shard<R> {
    /// Runs `request` on shard `owner` and returns its reply; fails only when
    /// that shard has gone away (shutting down).
    pub async fn call<C: OwnerCall<R>>(
        self: &Rc<Self>,
        owner: usize,
        request: C,
    ) -> Result<C::Reply, RequestError> {
        if owner == self.id {
            return Ok(request.run(self.clone()).await);
        }
        let (reply, receiver) = oneshot::channel();
        self.send_to(owner, envelope(owner, request, reply)).await?;
        receiver.await.map_err(|_| RequestError::ShardGone(owner))
    }
}

/// Packs a request for shard `owner` and its reply slot: on the owner, the
/// job spawns the request's work as a task of its own, so the receive loop
/// never waits.
fn envelope<R: 'static, C: OwnerCall<R>>(
    owner: usize,
    request: C,
    mut reply: oneshot::Sender<C::Reply>,
) -> Envelope<Shard<R>> {
    Envelope::new(move |shard: &Rc<Shard<R>>| {
        // The mesh delivers to the peer it was given, and a shard's id is
        // its place in the mesh: an owner call never runs elsewhere.
        assert_eq!(
            shard.id, owner,
            "an owner call runs on the shard it was sent to: sent to shard {owner}, opened on shard {}",
            shard.id
        );
        let shard = shard.clone();
        glommio::spawn_local(async move {
            if !C::CANCEL_WHEN_ASKER_GONE {
                let _ = reply.send(request.run(shard).await);
                return;
            }
            let answer = {
                let work = request.run(shard);
                let gone = reply.cancellation();
                futures::pin_mut!(work);
                match select(work, gone).await {
                    Either::Left((answer, _)) => Some(answer),
                    Either::Right(_) => None,
                }
            };
            if let Some(answer) = answer {
                let _ = reply.send(answer);
            }
        })
        .detach();
    })
}
