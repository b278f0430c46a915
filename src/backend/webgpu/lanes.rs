//! Which tensors stream from their files at once. A `Blob` stream in Chromium delivers its bytes
//! through one pipe whose round trips bound it: two streams over the two halves of a 1 GiB file
//! moved it to the GPU in 0.75-0.85 s against 0.9-1.05 s for one. Each lane reads one tensor
//! at a time, so the loader's host memory is a staging buffer per lane however many tensors are
//! asked for at once (`Promise.all` over a model's tensors); and the lanes take the tensors so
//! that each reads a contiguous run of the file, its next tensor starting where its last one
//! ended (which continues its `Blob` stream, see `BlobRangeReader` in `js/webnn.js`).

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use crate::backend::oneshot;

/// Streams at once.
pub const LANES: usize = 2;

/// A tensor's bytes: the address of its source (one per open file) and their offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Span {
    pub source: usize,
    pub start: u64,
    pub end: u64,
}

impl Span {
    fn follows(&self, before: &Span) -> bool {
        self.source == before.source && self.start == before.end
    }

    fn bytes(&self) -> u64 {
        self.end - self.start
    }
}

struct Waiting {
    id: u64,
    span: Span,
    granted: oneshot::Sender<()>,
}

/// The lanes of a context: free ones, the spans being streamed, the streams waiting for a lane.
pub(crate) struct Lanes {
    free: Cell<usize>,
    active: RefCell<Vec<Span>>,
    waiting: RefCell<Vec<Waiting>>,
    /// Whether a grant is scheduled (for after the calls of this turn have asked).
    scheduled: Cell<bool>,
    next_id: Cell<u64>,
}

impl Default for Lanes {
    fn default() -> Self {
        Lanes {
            free: Cell::new(LANES),
            active: RefCell::default(),
            waiting: RefCell::default(),
            scheduled: Cell::new(false),
            next_id: Cell::new(0),
        }
    }
}

/// A lane held while a tensor streams; dropping it hands the lane on.
pub(crate) struct Lane {
    lanes: Rc<Lanes>,
    span: Span,
}

impl Drop for Lane {
    fn drop(&mut self) {
        self.lanes.release(self.span);
    }
}

/// A wait for a lane. Dropped (the future cancelled), it leaves the queue, or hands on the lane
/// it was just given.
struct Asking {
    lanes: Rc<Lanes>,
    id: u64,
    span: Span,
}

impl Drop for Asking {
    fn drop(&mut self) {
        let mut waiting = self.lanes.waiting.borrow_mut();
        let before = waiting.len();
        waiting.retain(|w| w.id != self.id);
        let granted = waiting.len() == before;
        drop(waiting);
        if granted {
            self.lanes.release(self.span);
        }
    }
}

impl Lanes {
    /// Waits for a lane to stream `span`. Lanes are handed out once the calls made in the same
    /// turn have all asked (a later task on the web), so that tensors asked for together are
    /// split between the lanes in contiguous runs rather than taken in turn.
    pub(crate) async fn acquire(self: &Rc<Self>, span: Span) -> Lane {
        let (granted, receiver) = oneshot::channel();
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        self.waiting.borrow_mut().push(Waiting { id, span, granted });
        let asking = Asking { lanes: self.clone(), id, span };
        if !self.scheduled.replace(true) {
            let lanes = self.clone();
            crate::backend::oneshot::spawn(async move {
                lanes.scheduled.set(false);
                lanes.grant();
            });
        }
        receiver.await;
        std::mem::forget(asking);
        Lane { lanes: self.clone(), span }
    }

    fn release(&self, span: Span) {
        {
            let mut active = self.active.borrow_mut();
            if let Some(i) = active.iter().position(|s| *s == span) {
                active.swap_remove(i);
            }
        }
        // The lane goes on with the tensor that starts where this one ended, if one waits.
        let next = self.waiting.borrow().iter().position(|w| w.span.follows(&span));
        match next {
            Some(i) => self.start(i),
            None => {
                self.free.set(self.free.get() + 1);
                self.grant();
            }
        }
    }

    /// Hands the free lanes to waiting streams.
    fn grant(&self) {
        while self.free.get() > 0 {
            let Some(i) = self.pick() else { return };
            self.free.set(self.free.get() - 1);
            self.start(i);
        }
    }

    fn start(&self, i: usize) {
        let Waiting { span, granted, .. } = self.waiting.borrow_mut().swap_remove(i);
        self.active.borrow_mut().push(span);
        granted.send(());
    }

    /// The waiting stream a free lane takes: the first of the largest run of waiting spans that
    /// no lane is about to continue; when every run continues a lane's span, the span halfway
    /// through the largest (by bytes), so that the two lanes split it.
    fn pick(&self) -> Option<usize> {
        let waiting = self.waiting.borrow();
        let mut order: Vec<usize> = (0..waiting.len()).collect();
        order.sort_by_key(|&i| waiting[i].span);
        // Runs of consecutive spans: (first position in `order`, end position, bytes).
        let mut runs: Vec<(usize, usize, u64)> = Vec::new();
        for (k, &i) in order.iter().enumerate() {
            let span = waiting[i].span;
            match runs.last_mut() {
                Some(run) if span.follows(&waiting[order[k - 1]].span) => {
                    run.1 = k + 1;
                    run.2 += span.bytes();
                }
                _ => runs.push((k, k + 1, span.bytes())),
            }
        }
        let active = self.active.borrow();
        let continued = |run: &(usize, usize, u64)| active.iter().any(|a| waiting[order[run.0]].span.follows(a));
        if let Some(run) = runs.iter().filter(|r| !continued(r)).max_by_key(|r| r.2) {
            return Some(order[run.0]);
        }
        // Halfway through the run and the span it continues (whose lane goes on into it).
        let &(first, end, run_bytes) = runs.iter().max_by_key(|r| r.2)?;
        let head = waiting[order[first]].span;
        let mut before = active.iter().find(|a| head.follows(a)).map_or(0, Span::bytes);
        let bytes = run_bytes + before;
        for k in first..end {
            if before * 2 >= bytes {
                return Some(order[k]);
            }
            before += waiting[order[k]].span.bytes();
        }
        Some(order[end - 1])
    }
}

// Native: `wasm-pack test` builds the unit tests for wasm32 too.
#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use std::future::Future;

    /// Tensors of `mib` MiB one after the other in source 1.
    fn spans(mib: &[u64]) -> Vec<Span> {
        let mut start = 100;
        mib.iter()
            .map(|m| {
                let span = Span { source: 1, start, end: start + (m << 20) };
                start = span.end;
                span
            })
            .collect()
    }

    /// Lanes with `spans` waiting, as calls made together leave them; the receivers in order.
    fn waiting(spans: &[Span]) -> (Lanes, Vec<oneshot::Receiver<()>>) {
        let lanes = Lanes::default();
        let receivers = spans
            .iter()
            .map(|&span| {
                let (granted, receiver) = oneshot::channel();
                lanes.waiting.borrow_mut().push(Waiting { id: 0, span, granted });
                receiver
            })
            .collect();
        (lanes, receivers)
    }

    fn granted(receivers: &[oneshot::Receiver<()>]) -> Vec<usize> {
        (0..receivers.len()).filter(|&i| receivers[i].is_ready()).collect()
    }

    #[test]
    fn tensors_asked_together_split_into_two_runs_that_each_lane_continues() {
        let s = spans(&[64; 16]);
        let (lanes, r) = waiting(&s);
        lanes.grant();
        assert_eq!(granted(&r), vec![0, 8]);
        // Each lane goes on with the tensor after its own.
        lanes.release(s[0]);
        assert_eq!(granted(&r), vec![0, 1, 8]);
        lanes.release(s[8]);
        assert_eq!(granted(&r), vec![0, 1, 8, 9]);
        assert_eq!(lanes.free.get(), 0);
    }

    #[test]
    fn the_split_is_by_bytes() {
        // 256 MiB first, then eight of 32: the second lane starts halfway through the bytes.
        let s = spans(&[256, 32, 32, 32, 32, 32, 32, 32, 32]);
        let (lanes, r) = waiting(&s);
        lanes.grant();
        assert_eq!(granted(&r), vec![0, 1]);
    }

    #[test]
    fn a_lane_with_nothing_after_its_tensor_takes_the_middle_of_what_is_left() {
        let s = spans(&[64; 8]);
        let (lanes, r) = waiting(&s);
        lanes.grant();
        assert_eq!(granted(&r), vec![0, 4]);
        for i in 0..3 {
            lanes.release(s[i]);
        }
        // The first lane reached the tensor the second started with: it takes the middle of
        // 5-7 (which follow the second lane's tensor), so that both keep streaming.
        lanes.release(s[3]);
        assert_eq!(granted(&r), vec![0, 1, 2, 3, 4, 6]);
    }

    #[test]
    fn one_tensor_at_a_time_and_tensors_of_other_files_take_a_free_lane_at_once() {
        let mut s = spans(&[8, 8]);
        s[1].source = 2;
        let (lanes, r) = waiting(&s);
        lanes.grant();
        assert_eq!(granted(&r), vec![0, 1]);
        lanes.release(s[0]);
        lanes.release(s[1]);
        assert_eq!(lanes.free.get(), LANES);
        assert!(lanes.active.borrow().is_empty());
    }

    /// An `acquire` polled once, still waiting.
    fn waiting_for_lane(lanes: &Rc<Lanes>, span: Span) -> std::pin::Pin<Box<impl Future<Output = Lane> + '_>> {
        let mut wait = Box::pin(lanes.acquire(span));
        let waker = std::task::Waker::noop();
        assert!(wait.as_mut().poll(&mut std::task::Context::from_waker(waker)).is_pending());
        wait
    }

    #[test]
    fn a_cancelled_wait_leaves_the_queue_or_hands_on_its_lane() {
        let lanes = Rc::new(Lanes::default());
        let s = spans(&[1, 1, 1, 1]);
        let held: Vec<Lane> = s[..2].iter().map(|&span| pollster::block_on(lanes.acquire(span))).collect();
        // Both lanes are taken: a third wait is dropped before it is granted.
        let third = waiting_for_lane(&lanes, s[2]);
        assert_eq!(lanes.waiting.borrow().len(), 1);
        drop(third);
        assert!(lanes.waiting.borrow().is_empty());
        // A fourth is granted when a lane is released, and dropped before it runs: it hands it on.
        let fourth = waiting_for_lane(&lanes, s[3]);
        drop(held);
        assert_eq!(lanes.free.get(), LANES - 1);
        drop(fourth);
        assert_eq!(lanes.free.get(), LANES);
        assert!(lanes.active.borrow().is_empty());
    }

    #[test]
    fn acquire_hands_out_a_lane_and_dropping_it_gives_it_back() {
        let lanes = Rc::new(Lanes::default());
        let span = spans(&[1])[0];
        let lane = pollster::block_on(lanes.acquire(span));
        assert_eq!(lanes.free.get(), LANES - 1);
        drop(lane);
        assert_eq!(lanes.free.get(), LANES);
    }
}
