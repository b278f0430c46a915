//! The context-wide pool of intermediate buffers. Work on one queue runs in submission order, so
//! graphs never run at the same time and can share intermediates: slot `i` is sized for the
//! largest use of slot `i` among resident graphs, and the pool holds the maximum of their needs
//! instead of the sum.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use crate::memory::{Allocator, DeviceBuffer};

#[derive(Default)]
pub struct IntermediatePool {
    slots: RefCell<Vec<Option<Rc<DeviceBuffer>>>>,
    /// Changes whenever a slot's buffer changes, so bind groups know to rebuild.
    generation: Cell<u64>,
}

impl IntermediatePool {
    pub fn generation(&self) -> u64 {
        self.generation.get()
    }

    /// Bytes the pool would have to add to hold buffers of `sizes` in slots `0..`.
    pub fn growth_for(&self, sizes: &[u64]) -> u64 {
        let slots = self.slots.borrow();
        sizes
            .iter()
            .enumerate()
            .map(|(i, &size)| match slots.get(i) {
                Some(Some(b)) if b.size >= size => 0,
                Some(Some(b)) => size - b.size,
                _ => size,
            })
            .sum()
    }

    /// Makes slots `0..sizes.len()` at least as large as `sizes`.
    pub fn ensure(&self, allocator: &dyn Allocator, sizes: &[u64]) {
        let mut slots = self.slots.borrow_mut();
        if slots.len() < sizes.len() {
            slots.resize(sizes.len(), None);
        }
        for (slot, &size) in slots.iter_mut().zip(sizes) {
            if slot.as_ref().map(|b| b.size < size).unwrap_or(true) {
                *slot = Some(Rc::new(allocator.create_buffer_unchecked(size, "intermediate")));
                self.generation.set(self.generation.get() + 1);
            }
        }
    }

    /// The buffer of a slot (after [`ensure`](Self::ensure)).
    pub fn get(&self, slot: usize) -> Option<Rc<DeviceBuffer>> {
        self.slots.borrow().get(slot).cloned().flatten()
    }

    /// Frees what no resident graph needs: slots past `needed.len()` and slots larger than the
    /// largest resident need (they are recreated at the right size when next needed).
    pub fn trim(&self, needed: &[u64]) {
        let mut slots = self.slots.borrow_mut();
        let mut changed = false;
        for (i, slot) in slots.iter_mut().enumerate() {
            let keep = match (slot.as_ref(), needed.get(i)) {
                (Some(b), Some(&n)) => b.size <= n,
                (None, _) => true,
                (Some(_), None) => false,
            };
            if !keep {
                *slot = None;
                changed = true;
            }
        }
        while matches!(slots.last(), Some(None)) {
            slots.pop();
        }
        if changed {
            self.generation.set(self.generation.get() + 1);
        }
    }

    /// Frees the slot buffers created after buffer id `last` (by an allocation that failed).
    pub fn discard_newer_than(&self, last: u64) {
        let mut slots = self.slots.borrow_mut();
        for slot in slots.iter_mut() {
            if slot.as_ref().is_some_and(|b| b.id > last) {
                *slot = None;
                self.generation.set(self.generation.get() + 1);
            }
        }
    }

    pub fn device_bytes(&self) -> u64 {
        self.slots.borrow().iter().flatten().map(|b| b.size).sum()
    }
}
