//! Work spread over the threads of the current rayon pool by hand, where
//! rayon's halving of an index range balances badly: a few large, unequal
//! items.

use rayon::prelude::*;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Runs `f` on every item on the threads of the current pool, the
/// costliest (by `cost`) first, each thread taking the next item when it
/// is free (rayon's halving of a range can leave one thread the last
/// large items alone).
pub fn run_largest_first<T: Send>(
    mut items: Vec<T>,
    cost: impl Fn(&T) -> usize,
    f: impl Fn(T) + Sync,
) {
    items.sort_by_key(|t| std::cmp::Reverse(cost(t)));
    let slots: Vec<Mutex<Option<T>>> = items.into_iter().map(|t| Mutex::new(Some(t))).collect();
    let next = AtomicUsize::new(0);
    let work = || {
        loop {
            let k = next.fetch_add(1, Ordering::Relaxed);
            let Some(slot) = slots.get(k) else { break };
            let item = slot.lock().ok().and_then(|mut s| s.take());
            if let Some(item) = item {
                f(item);
            }
        }
    };
    (0..rayon::current_num_threads().min(slots.len()))
        .into_par_iter()
        .with_max_len(1)
        .for_each(|_| work());
}
