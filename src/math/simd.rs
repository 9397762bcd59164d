//! The vector unit's state after faer's kernels.
//!
//! faer's blocked kernels (the Cholesky factorisation, triangular solves,
//! products) pick AVX-512 or AVX2 code at run time, while the rest of
//! tempest is compiled for the baseline x86-64 target and runs SSE code.
//! On some processors SSE code that runs while the upper halves of the
//! vector registers are still "dirty" from wide code pays a false
//! dependency on every instruction until something clears them; measured
//! on the project's machines, the kernel's reverse pass at n = 741 took
//! 16–23 ms right after the inverse for the gradient and 10–11 ms after
//! the Gram matrix. [`settle`] clears them (`vzeroupper`) on the calling
//! thread; every faer call (math::linalg, math::adjoint::inverse) is
//! followed by it, on the thread that ran it.

/// Clears the upper halves of the vector registers on this thread where
/// the processor has AVX (nothing elsewhere). Cheap (one instruction after
/// a cached feature test).
#[inline]
pub fn settle() {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: the processor has AVX (tested just above), which is all
        // `zero_upper` requires.
        unsafe { zero_upper() }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
fn zero_upper() {
    std::arch::x86_64::_mm256_zeroupper();
}
