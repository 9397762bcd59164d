//! Reuse of large scratch buffers between evaluations.
//!
//! One log marginal likelihood with its gradient at N = 741 goes through
//! four N × N matrices (the Gram matrix, built and factored in one
//! buffer; L⁻¹; A⁻¹; the weight W). Freshly allocated, each costs the
//! operating system's page faults on first touch (about 1 µs per 4 KiB
//! page measured on the project's machines: 1.2 ms for one 4.4 MB matrix,
//! nearly half of its 2.7 ms factorisation) and the allocator hands such
//! blocks back to the system when they are freed. Buffers handed back with [`give`] are
//! kept (up to [`MAX_BYTES`] in all) and handed out again by [`take`] for
//! the next request of the same length.
//!
//! A buffer from [`take`] holds arbitrary values (zeros when new,
//! an earlier computation's numbers when reused): callers write every
//! element they read, so results never depend on the pool's state.

use std::sync::Mutex;

/// Buffers shorter than this (in f64s, 512 KiB) are not kept: the
/// allocator reuses small blocks well by itself.
pub const MIN_LEN: usize = 1 << 16;

/// The most bytes the pool keeps.
pub const MAX_BYTES: usize = 256 << 20;

static POOL: Mutex<Vec<Vec<f64>>> = Mutex::new(Vec::new());

/// A buffer of `len` f64s: a kept one of that length when there is one,
/// else a new one of zeros. Its contents are unspecified (see the module
/// docs).
pub fn take(len: usize) -> Vec<f64> {
    if len >= MIN_LEN
        && let Ok(mut pool) = POOL.lock()
        && let Some(k) = pool.iter().rposition(|b| b.len() == len)
    {
        return pool.swap_remove(k);
    }
    vec![0.0; len]
}

/// Hands a buffer back for reuse; dropped when it is small or the pool
/// is full (the oldest buffers are dropped first).
pub fn give(buf: Vec<f64>) {
    if buf.len() < MIN_LEN || buf.len() * 8 > MAX_BYTES {
        return;
    }
    let Ok(mut pool) = POOL.lock() else {
        return;
    };
    pool.push(buf);
    let mut bytes: usize = pool.iter().map(|b| b.len() * 8).sum();
    while bytes > MAX_BYTES {
        let old = pool.remove(0);
        bytes -= old.len() * 8;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_given_back_is_handed_out_again_for_the_same_length() {
        let len = MIN_LEN + 12_345;
        let mut b = take(len);
        assert_eq!(b.len(), len);
        b[7] = 3.5;
        let p = b.as_ptr();
        give(b);
        let again = take(len);
        assert_eq!(again.len(), len);
        // Another test may have taken it in between; when it is ours, it
        // is the same memory.
        if again.as_ptr() == p {
            assert_eq!(again[7], 3.5);
        }
        give(again);
        assert_eq!(take(len + 1).len(), len + 1);
        assert_eq!(take(10).len(), 10);
    }
}
