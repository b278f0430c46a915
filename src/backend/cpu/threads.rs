//! The CPU kernels' worker threads: [`for_each`] splits a kernel into tasks that the calling
//! thread and the workers claim one at a time.
//!
//! Natively the workers are threads spawned on first use (`WEBNN_WGPU_CPU_THREADS` threads in
//! all, default: the available parallelism, at most 8). In wasm they exist only in the atomics
//! build (`pkg/webnn_wgpu_threads*`, loaded when the page is cross-origin isolated): each is a
//! Web Worker that instantiates the module over the shared memory and calls [`work`]. Elsewhere
//! (the plain wasm build) there are none and every task runs on the caller.
//!
//! The caller never blocks: a browser's main thread may not wait on an atomic, so it runs tasks
//! itself and then spins until the workers finish theirs. Only workers sleep (a futex wait on
//! `wake`). A job is published as a generation number: a worker claims task `i` of generation
//! `g` by a compare-and-swap of `(g, i)` to `(g, i + 1)` on `state`, so a worker that wakes late
//! can never run a task of a job it did not see published, and the caller's stack frame (the
//! job) outlives every claimed task because the caller waits for all of them.
//! One job runs at a time; a caller that finds the pool busy (another thread's job, or a task
//! that splits again) runs its tasks itself, in order.

use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::ops::Range;
use std::sync::Mutex;

use crate::error::Result;

/// The task index while a job is being published: no task can be claimed.
const CLOSED: u64 = u32::MAX as u64;

struct Pool {
    /// The generation in the high 32 bits, the next unclaimed task in the low 32 bits.
    state: AtomicU64,
    /// Tasks of the current job.
    tasks: AtomicUsize,
    /// The current job: a `*const Job` on the caller's stack.
    job: AtomicPtr<()>,
    /// Tasks of the current job not yet finished.
    remaining: AtomicUsize,
    /// Bumped for every job; workers sleep while it is unchanged.
    wake: AtomicU32,
    /// Workers that have entered [`work`].
    workers: AtomicUsize,
    /// A job is in progress.
    busy: AtomicBool,
    /// A task panicked (native only: in wasm a panic aborts).
    panicked: AtomicBool,
}

static POOL: Pool = Pool {
    state: AtomicU64::new(CLOSED),
    tasks: AtomicUsize::new(0),
    job: AtomicPtr::new(std::ptr::null_mut()),
    remaining: AtomicUsize::new(0),
    wake: AtomicU32::new(0),
    workers: AtomicUsize::new(0),
    busy: AtomicBool::new(false),
    panicked: AtomicBool::new(false),
};

struct Job<'a> {
    f: &'a (dyn Fn(usize) + Sync),
}

/// Threads that run tasks: the caller and the workers.
pub fn count() -> usize {
    platform::start();
    POOL.workers.load(SeqCst) + 1
}

/// Runs `f(0)`, ..., `f(tasks - 1)`, each once, on the caller and the workers; returns when all
/// have finished. The first error (by task index) is returned.
pub fn try_for_each(tasks: usize, f: &(dyn Fn(usize) -> Result<()> + Sync)) -> Result<()> {
    if tasks <= 1 {
        return (0..tasks).try_for_each(f);
    }
    let errors: Vec<Mutex<Option<crate::error::Error>>> = (0..tasks).map(|_| Mutex::new(None)).collect();
    for_each(tasks, &|i| {
        if let Err(e) = f(i) {
            // Each slot is locked by its own task, and by the caller only after all have ended.
            if let Ok(mut slot) = errors[i].try_lock() {
                *slot = Some(e);
            }
        }
    });
    for slot in errors {
        if let Some(e) = slot.into_inner().ok().flatten() {
            return Err(e);
        }
    }
    Ok(())
}

/// `0..len` in ranges for the threads: about `per_thread` a thread, each a multiple of
/// `multiple` long but the last; one range when `split` is false or there is one thread.
pub fn ranges(len: usize, split: bool, per_thread: usize, multiple: usize) -> Vec<Range<usize>> {
    let parts = if split { per_thread * count() } else { 1 };
    let per = len.div_ceil(parts.max(1)).next_multiple_of(multiple.max(1)).max(1);
    (0..len).step_by(per).map(|i| i..len.min(i + per)).collect()
}

/// Runs `f(i, chunk)` for every chunk of `data` cut into `chunk` elements (the last may be
/// shorter), on the caller and the workers; the first error (by chunk) is returned.
pub fn try_for_each_chunk<T: Send>(data: &mut [T], chunk: usize, f: &(dyn Fn(usize, &mut [T]) -> Result<()> + Sync)) -> Result<()> {
    let (len, chunk) = (data.len(), chunk.max(1));
    let base = Base(data.as_mut_ptr());
    try_for_each(len.div_ceil(chunk), &|i| {
        let start = i * chunk;
        let end = len.min(start + chunk);
        // SAFETY: chunk `i` lies inside `data`, which this call borrows mutably throughout, and
        // each chunk is handed to exactly one task.
        let part = unsafe { std::slice::from_raw_parts_mut(base.get().add(start), end - start) };
        f(i, part)
    })
}

/// The start of a slice whose disjoint chunks go to different threads.
struct Base<T>(*mut T);

// SAFETY: only `try_for_each_chunk` makes slices from it, one per chunk, and `T: Send`.
unsafe impl<T: Send> Sync for Base<T> {}

impl<T> Base<T> {
    fn get(&self) -> *mut T {
        self.0
    }
}

/// A float slice that tasks write in disjoint segments where `try_for_each_chunk` cannot cut it
/// (tiles of a matrix, rows of a strided tensor).
pub struct Disjoint<'a> {
    ptr: *mut f32,
    len: usize,
    _slice: std::marker::PhantomData<&'a mut [f32]>,
}

// SAFETY: segments are handed out only by the unsafe `segment`, whose callers keep those used at
// the same time disjoint.
unsafe impl Sync for Disjoint<'_> {}

impl<'a> Disjoint<'a> {
    pub fn new(data: &'a mut [f32]) -> Disjoint<'a> {
        Disjoint { ptr: data.as_mut_ptr(), len: data.len(), _slice: std::marker::PhantomData }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// Elements `start..start + len`, clamped to the slice.
    ///
    /// # Safety
    /// While the segment lives, no other reference to its elements may exist: segments that
    /// tasks hold at the same time must not overlap.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn segment(&self, start: usize, len: usize) -> &mut [f32] {
        let end = start.saturating_add(len).min(self.len);
        let start = start.min(end);
        // SAFETY: in bounds by the clamping; exclusive by the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(start), end - start) }
    }
}

/// Runs `f(0)`, ..., `f(tasks - 1)`, each once, on the caller and the workers.
pub fn for_each(tasks: usize, f: &(dyn Fn(usize) + Sync)) {
    if tasks <= 1 || tasks as u64 >= CLOSED || count() == 1 || POOL.busy.swap(true, SeqCst) {
        (0..tasks).for_each(f);
        return;
    }
    let job = Job { f };
    let generation = (POOL.state.load(SeqCst) >> 32).wrapping_add(1) & 0xffff_ffff;
    POOL.state.store(generation << 32 | CLOSED, SeqCst);
    POOL.tasks.store(tasks, SeqCst);
    POOL.job.store(&job as *const Job as *mut (), SeqCst);
    POOL.remaining.store(tasks, SeqCst);
    POOL.state.store(generation << 32, SeqCst);
    POOL.wake.fetch_add(1, SeqCst);
    platform::notify();
    let own = platform::catch(run_tasks);
    let mut spins = 0u32;
    while POOL.remaining.load(SeqCst) != 0 {
        spins = spins.wrapping_add(1);
        platform::pause(spins);
    }
    POOL.job.store(std::ptr::null_mut(), SeqCst);
    let panicked = POOL.panicked.swap(false, SeqCst);
    POOL.busy.store(false, SeqCst);
    platform::resume(own, panicked);
}

/// Claims and runs tasks of the current job until none is left to claim.
fn run_tasks() {
    loop {
        let state = POOL.state.load(SeqCst);
        let index = state & 0xffff_ffff;
        if index >= POOL.tasks.load(SeqCst) as u64 {
            return;
        }
        if POOL.state.compare_exchange(state, state + 1, SeqCst, SeqCst).is_err() {
            continue;
        }
        // SAFETY: the claim succeeded, so task `index` of the job published with this state's
        // generation is unfinished and its caller is still waiting in `for_each`, which keeps
        // `job` alive; `job` was stored before the generation opened and changes only after
        // every task of it has finished.
        let job = unsafe { &*(POOL.job.load(SeqCst) as *const Job) };
        if platform::catch(|| (job.f)(index as usize)).is_err() {
            POOL.panicked.store(true, SeqCst);
        }
        POOL.remaining.fetch_sub(1, SeqCst);
    }
}

/// A worker's loop: sleeps until a job is published, helps run it, and sleeps again. Never
/// returns. In wasm, called by each Web Worker of the atomics build (never on a page's main
/// thread, which may not wait).
pub fn work() -> ! {
    POOL.workers.fetch_add(1, SeqCst);
    let mut seen = POOL.wake.load(SeqCst);
    loop {
        // A graph's kernels come in quick succession: spin a little before sleeping, since a
        // sleeping worker takes tens of microseconds to wake.
        let mut spins = 0;
        while POOL.wake.load(SeqCst) == seen && spins < SPINS_BEFORE_SLEEP {
            std::hint::spin_loop();
            spins += 1;
        }
        platform::wait(&POOL.wake, seen);
        seen = POOL.wake.load(SeqCst);
        run_tasks();
    }
}

/// Checks of `wake` a worker makes before it sleeps: enough to span the gap between a graph's
/// split kernels, not a serial stretch of small ones, through which a spinning worker would hold a
/// core that the browser's other threads then take from the page's thread.
const SPINS_BEFORE_SLEEP: u32 = 1 << 16;

/// How the pool sleeps, wakes and spins: futex-style atomics in wasm, a condition variable and
/// spawned threads natively.
#[cfg(not(target_arch = "wasm32"))]
mod platform {
    use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
    use std::sync::{Condvar, Mutex, Once};

    static START: Once = Once::new();
    static LOCK: Mutex<()> = Mutex::new(());
    static SIGNAL: Condvar = Condvar::new();

    pub fn start() {
        START.call_once(|| {
            let threads = std::env::var("WEBNN_WGPU_CPU_THREADS")
                .ok()
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()).min(8))
                .clamp(1, 64);
            let mut spawned = 0;
            for i in 1..threads {
                if std::thread::Builder::new().name(format!("webnn-cpu-{i}")).spawn(|| super::work()).is_ok() {
                    spawned += 1;
                }
            }
            // The workers count themselves as they start; wait for them so that `count()` is
            // settled from the first job on.
            while super::POOL.workers.load(SeqCst) < spawned {
                std::thread::yield_now();
            }
        });
    }

    pub fn wait(wake: &AtomicU32, seen: u32) {
        let mut guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
        while wake.load(SeqCst) == seen {
            guard = SIGNAL.wait(guard).unwrap_or_else(|e| e.into_inner());
        }
    }

    pub fn notify() {
        drop(LOCK.lock().unwrap_or_else(|e| e.into_inner()));
        SIGNAL.notify_all();
    }

    pub fn pause(spins: u32) {
        if spins < 64 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }

    pub type Caught = std::thread::Result<()>;

    pub fn catch(f: impl FnOnce()) -> Caught {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
    }

    /// Re-raises the caller's own panic, or a worker's, once every task has ended.
    pub fn resume(own: Caught, worker_panicked: bool) {
        if let Err(payload) = own {
            std::panic::resume_unwind(payload);
        }
        if worker_panicked {
            panic!("a CPU kernel task panicked on a worker thread");
        }
    }
}

#[cfg(target_arch = "wasm32")]
mod platform {
    use std::sync::atomic::AtomicU32;

    pub fn start() {}

    #[cfg(target_feature = "atomics")]
    pub fn wait(wake: &AtomicU32, seen: u32) {
        // SAFETY: `wake` is a live, aligned u32 in the shared memory; the wait returns when it is
        // notified or its value differs from `seen`.
        unsafe {
            core::arch::wasm32::memory_atomic_wait32(wake.as_ptr().cast::<i32>(), seen as i32, -1);
        }
    }

    #[cfg(not(target_feature = "atomics"))]
    pub fn wait(_wake: &AtomicU32, _seen: u32) {}

    pub fn notify() {
        #[cfg(target_feature = "atomics")]
        // SAFETY: `wake` is a live, aligned u32 in the shared memory.
        unsafe {
            core::arch::wasm32::memory_atomic_notify(super::POOL.wake.as_ptr().cast::<i32>(), u32::MAX);
        }
    }

    pub fn pause(_spins: u32) {
        std::hint::spin_loop();
    }

    /// A panic aborts in wasm, so there is nothing to catch.
    pub fn catch(f: impl FnOnce()) -> Result<(), ()> {
        f();
        Ok(())
    }

    pub fn resume(_own: Result<(), ()>, _worker_panicked: bool) {}
}
