//! The context's memory state: the budget, the graphs it may evict (least recently dispatched
//! first), the host byte counter and the swap statistics of `memoryInfo()`.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use crate::memory::{EvictionPriority, HostCache, IntermediatePool};

/// `MLContext.memoryInfo()`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(target_arch = "wasm32", derive(serde::Serialize), serde(rename_all = "camelCase"))]
pub struct MemoryInfo {
    pub device_bytes: u64,
    pub host_bytes: u64,
    pub budget_bytes: Option<u64>,
    pub swap_ins: u64,
    pub swap_outs: u64,
    pub bytes_uploaded: u64,
    pub bytes_streamed_from_disk: u64,
}

pub struct MemoryState {
    pub budget: Cell<Option<u64>>,
    /// Bytes of live host copies (constants' [`HostBytes`](crate::memory::HostBytes) and the
    /// host cache's copies).
    pub host_bytes: Rc<Cell<u64>>,
    /// Host copies of constants from weight files, under `hostMemoryBudget`.
    pub host_cache: HostCache,
    pub pool: IntermediatePool,
    pub swap_ins: Cell<u64>,
    pub swap_outs: Cell<u64>,
    pub bytes_uploaded: Cell<u64>,
    pub bytes_streamed_from_disk: Cell<u64>,
    /// Bytes read ahead for constants and not yet converted (see `read_ahead`).
    pub read_ahead: Rc<Cell<u64>>,
    /// Dispatch clock for least-recently-used ordering.
    pub clock: Cell<u64>,
    /// Graphs that may be evicted, by id.
    pub graphs: RefCell<Vec<std::rc::Weak<dyn Evictable>>>,
}

/// What the budget needs from a graph to evict it.
pub trait Evictable {
    fn id(&self) -> u64;
    fn is_resident(&self) -> bool;
    fn last_used(&self) -> u64;
    /// Whether a dispatch of the graph is between its swap-in and its recording (not evictable).
    fn in_flight(&self) -> bool;
    fn priority(&self) -> EvictionPriority;
    /// Releases the graph's GPU memory (to the host tier).
    fn evict(&self);
    /// Intermediate slot sizes the graph needs while resident.
    fn slot_sizes(&self) -> Vec<u64>;
}

impl MemoryState {
    pub fn new(budget: Option<u64>, host_budget: Option<u64>) -> MemoryState {
        let host_bytes = Rc::new(Cell::new(0));
        MemoryState {
            budget: Cell::new(budget),
            host_cache: HostCache::new(host_budget, host_bytes.clone()),
            host_bytes,
            pool: IntermediatePool::default(),
            swap_ins: Cell::new(0),
            swap_outs: Cell::new(0),
            bytes_uploaded: Cell::new(0),
            bytes_streamed_from_disk: Cell::new(0),
            read_ahead: Rc::default(),
            clock: Cell::new(0),
            graphs: RefCell::new(Vec::new()),
        }
    }

    pub fn tick(&self) -> u64 {
        let t = self.clock.get() + 1;
        self.clock.set(t);
        t
    }

    pub fn register(&self, graph: std::rc::Weak<dyn Evictable>) {
        let mut graphs = self.graphs.borrow_mut();
        graphs.retain(|g| g.strong_count() > 0);
        graphs.push(graph);
    }

    /// The resident graphs other than `except` and not in flight, in eviction order: lowest
    /// priority first, least recently used first within a priority.
    pub fn eviction_order(&self, except: u64) -> Vec<Rc<dyn Evictable>> {
        let mut live: Vec<Rc<dyn Evictable>> = self
            .graphs
            .borrow()
            .iter()
            .filter_map(|g| g.upgrade())
            .filter(|g| g.id() != except && g.is_resident() && !g.in_flight())
            .collect();
        live.sort_by_key(|g| (g.priority(), g.last_used()));
        live
    }

    /// The largest intermediate slot sizes among resident graphs (what the pool must keep).
    pub fn resident_slot_needs(&self) -> Vec<u64> {
        self.slot_needs_with(0)
    }

    /// [`resident_slot_needs`](Self::resident_slot_needs) and those of graph `incoming`, which a
    /// swap-in is making resident: evicting for its room must not free the slots it would create
    /// again at once (at the budget, the victim's slots usually fit it).
    pub fn slot_needs_with(&self, incoming: u64) -> Vec<u64> {
        let mut needs: Vec<u64> = Vec::new();
        for g in self.graphs.borrow().iter().filter_map(|g| g.upgrade()).filter(|g| g.is_resident() || g.id() == incoming) {
            for (i, size) in g.slot_sizes().into_iter().enumerate() {
                if needs.len() <= i {
                    needs.push(0);
                }
                needs[i] = needs[i].max(size);
            }
        }
        needs
    }
}
