//! The shard's second io_uring, for what glommio does not offer: splice,
//! wait-for-writable (`POLL_ADD POLLOUT`).
//!
//! glommio's own ring is private, so each [`crate::sendpath::Sender`] owns one
//! small `io-uring` ring. The shard's glommio executor must learn when that ring
//! has completions. The obvious route, `register_eventfd` plus a glommio await
//! on the eventfd, does not work with glommio 0.9: its only pollable fd
//! wrappers are sockets, and each of them first tries `recv(2)`/`send(2)` on
//! the fd, which fails with `ENOTSOCK` on an eventfd (and its files are
//! opened by path). So the ring rings a *doorbell* instead: every operation is
//! submitted hard-linked (`IOSQE_IO_HARDLINK`, so it runs even when the
//! operation fails) to a one-byte `IORING_OP_SEND` on one end of a Unix stream
//! socket pair. The other end is a glommio `UnixStream`, read by a small driver
//! task that reaps the completion queue and wakes the waiting futures. The
//! kernel posts an operation's completion before it issues the linked send, so
//! a doorbell byte never arrives before the completion it announces; the
//! driver still re-reaps every millisecond while operations are in flight, as
//! a bound on the damage should that ever not hold.
//!
//! Memory safety under cancellation: no operation points into memory that a
//! future owns (splice and poll take fds, which the kernel holds references to;
//! the doorbell byte is static), so a future dropped mid-operation leaves the
//! kernel nothing dangling. Its slot is marked abandoned and freed when the
//! completion arrives.

use futures_lite::{future, AsyncReadExt};
use io_uring::{opcode, squeue, types, IoUring};
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::rc::{Rc, Weak};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// Submission queue entries; the completion queue gets twice as many. Each
/// operation uses two entries (itself and its doorbell).
const RING_ENTRIES: u32 = 256;
/// `user_data` of the doorbell sends, whose completions are ignored.
const DOORBELL_USER_DATA: u64 = u64::MAX;
/// While operations are in flight the driver re-reaps at least this often.
const REAP_INTERVAL_MAX: Duration = Duration::from_millis(1);

static DOORBELL_BYTE: [u8; 1] = [1];

enum Slot {
    Free,
    Pending(Option<Waker>),
    Done(i32),
    /// Its future was dropped; freed when the completion arrives.
    Abandoned,
}

struct RingState {
    ring: IoUring,
    slots: Vec<Slot>,
    free_slots: Vec<usize>,
}

/// A per-shard io_uring whose completions wake glommio tasks.
pub(crate) struct Ring {
    state: RefCell<RingState>,
    doorbell_sender: OwnedFd,
    doorbell_receiver: Cell<Option<OwnedFd>>,
}

impl Ring {
    pub(crate) fn new() -> io::Result<Rc<Ring>> {
        let ring = IoUring::new(RING_ENTRIES)?;
        let mut fds = [0 as RawFd; 2];
        // SAFETY: `fds` is a valid array of two ints for socketpair to fill.
        let rc = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                0,
                fds.as_mut_ptr(),
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: socketpair succeeded, so both fds are open and owned by us alone.
        let (receiver, sender) =
            unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        Ok(Rc::new(Ring {
            state: RefCell::new(RingState {
                ring,
                slots: Vec::new(),
                free_slots: Vec::new(),
            }),
            // Non-blocking: when the doorbell socket is full, a lost byte does
            // not matter, as the receiver has unread bytes and will reap anyway.
            doorbell_sender: sender,
            doorbell_receiver: Cell::new(Some(receiver)),
        }))
    }

    /// Waits until `fd` is writable (or in error, which the next write reports).
    pub(crate) async fn wait_writable(self: &Rc<Self>, fd: RawFd) -> io::Result<()> {
        let entry = opcode::PollAdd::new(types::Fd(fd), libc::POLLOUT as u32).build();
        // SAFETY: a poll references no memory, only the fd (which the kernel pins).
        unsafe { self.submit(entry) }?.await?;
        Ok(())
    }

    /// `splice(2)` of up to `length_bytes` from `input` to `output`; an offset
    /// of -1 means the fd's own position (pipes, sockets).
    pub(crate) async fn splice(
        self: &Rc<Self>,
        input: RawFd,
        input_offset: i64,
        output: RawFd,
        length_bytes: u32,
    ) -> io::Result<usize> {
        let entry = opcode::Splice::new(
            types::Fd(input),
            input_offset,
            types::Fd(output),
            -1,
            length_bytes,
        )
        .build();
        // SAFETY: a splice references no memory, only fds (pinned by the kernel).
        let moved = unsafe { self.submit(entry) }?.await?;
        Ok(moved as usize)
    }

    /// Queues `entry` with its doorbell and submits it.
    ///
    /// # Safety
    ///
    /// `entry` must not reference memory that may be freed or moved before its
    /// completion, even if the returned future is dropped early.
    unsafe fn submit(self: &Rc<Self>, entry: squeue::Entry) -> io::Result<Completion> {
        self.start_driver()?;
        let mut state = self.state.borrow_mut();
        let slot = match state.free_slots.pop() {
            Some(slot) => {
                state.slots[slot] = Slot::Pending(None);
                slot
            }
            None => {
                state.slots.push(Slot::Pending(None));
                state.slots.len() - 1
            }
        };
        let entry = entry
            .user_data(slot as u64)
            .flags(squeue::Flags::IO_HARDLINK);
        let doorbell = opcode::Send::new(
            types::Fd(self.doorbell_sender.as_raw_fd()),
            DOORBELL_BYTE.as_ptr(),
            1,
        )
        .flags(libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL)
        .build()
        .user_data(DOORBELL_USER_DATA);
        let pushed = push_pair(&mut state.ring, &entry, &doorbell);
        let pushed = match pushed {
            Ok(()) => Ok(()),
            Err(_) => {
                // The queue is full of unsubmitted entries: submit them, retry.
                state.ring.submit()?;
                push_pair(&mut state.ring, &entry, &doorbell)
            }
        };
        if let Err(error) = pushed.and_then(|()| state.ring.submit().map(|_| ())) {
            state.slots[slot] = Slot::Free;
            state.free_slots.push(slot);
            return Err(error);
        }
        Ok(Completion {
            ring: self.clone(),
            slot,
            finished: false,
        })
    }

    fn start_driver(self: &Rc<Self>) -> io::Result<()> {
        let Some(receiver) = self.doorbell_receiver.take() else {
            return Ok(());
        };
        // SAFETY: we own `receiver` and hand its ownership to the glommio stream.
        let stream = unsafe { glommio::net::UnixStream::from_raw_fd(receiver.into_raw_fd()) };
        glommio::spawn_local(drive(Rc::downgrade(self), stream)).detach();
        Ok(())
    }

    /// Moves completions into their slots; returns whether any operation is
    /// still in flight.
    fn reap(&self) -> bool {
        let mut wakers = Vec::new();
        let in_flight = {
            let mut state = self.state.borrow_mut();
            let RingState {
                ring,
                slots,
                free_slots,
            } = &mut *state;
            for cqe in ring.completion() {
                if cqe.user_data() == DOORBELL_USER_DATA {
                    continue;
                }
                let index = cqe.user_data() as usize;
                let Some(slot) = slots.get_mut(index) else {
                    continue;
                };
                match std::mem::replace(slot, Slot::Done(cqe.result())) {
                    Slot::Pending(waker) => wakers.extend(waker),
                    Slot::Abandoned => {
                        *slot = Slot::Free;
                        free_slots.push(index);
                    }
                    Slot::Free | Slot::Done(_) => {
                        debug_assert!(false, "completion for idle slot {index}");
                    }
                }
            }
            slots
                .iter()
                .any(|slot| matches!(slot, Slot::Pending(_) | Slot::Abandoned))
        };
        wakers.into_iter().for_each(Waker::wake);
        in_flight
    }
}

fn push_pair(
    ring: &mut IoUring,
    entry: &squeue::Entry,
    doorbell: &squeue::Entry,
) -> io::Result<()> {
    let mut queue = ring.submission();
    if queue.capacity() - queue.len() < 2 {
        return Err(io::Error::new(
            io::ErrorKind::WouldBlock,
            "submission queue full",
        ));
    }
    // SAFETY: the caller of `Ring::submit` guarantees `entry` stays valid; the
    // doorbell points at a static byte. Two free entries were checked above.
    unsafe {
        queue
            .push(entry)
            .and_then(|()| queue.push(doorbell))
            .map_err(|_| io::Error::new(io::ErrorKind::WouldBlock, "submission queue full"))
    }
}

/// Reads doorbell bytes and reaps, until the ring is dropped (the doorbell's
/// sending end closes, so the read sees end of file).
async fn drive(ring: Weak<Ring>, mut doorbell: glommio::net::UnixStream) {
    let mut buffer = [0u8; 512];
    let mut in_flight = false;
    loop {
        let read = async { Some(doorbell.read(&mut buffer).await) };
        let outcome = if in_flight {
            let tick = async {
                glommio::timer::sleep(REAP_INTERVAL_MAX).await;
                None
            };
            future::or(read, tick).await
        } else {
            read.await
        };
        match outcome {
            Some(Ok(0)) | Some(Err(_)) => return,
            Some(Ok(_)) | None => {}
        }
        let Some(ring) = ring.upgrade() else {
            return;
        };
        in_flight = ring.reap();
    }
}

/// The result of one submitted operation: the CQE's `res`, as bytes or an error.
pub(crate) struct Completion {
    ring: Rc<Ring>,
    slot: usize,
    finished: bool,
}

impl Future for Completion {
    type Output = io::Result<u32>;

    fn poll(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Self::Output> {
        // Reap here too: the completion is often there before the doorbell.
        self.ring.reap();
        let mut state = self.ring.state.borrow_mut();
        let slot = &mut state.slots[self.slot];
        match slot {
            Slot::Done(result) => {
                let result = *result;
                *slot = Slot::Free;
                state.free_slots.push(self.slot);
                drop(state);
                self.finished = true;
                if result < 0 {
                    Poll::Ready(Err(io::Error::from_raw_os_error(-result)))
                } else {
                    Poll::Ready(Ok(result as u32))
                }
            }
            Slot::Pending(waker) => {
                *waker = Some(context.waker().clone());
                Poll::Pending
            }
            Slot::Free | Slot::Abandoned => {
                Poll::Ready(Err(io::Error::other("io_uring slot reused while awaited")))
            }
        }
    }
}

impl Drop for Completion {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let mut state = self.ring.state.borrow_mut();
        let slot = &mut state.slots[self.slot];
        if matches!(slot, Slot::Done(_)) {
            *slot = Slot::Free;
            state.free_slots.push(self.slot);
        } else {
            *slot = Slot::Abandoned;
        }
    }
}
