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

/// The instruction sets tempest's own loops are compiled for besides the
/// baseline, found once at run time ([`isa`]).
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Isa {
    /// The baseline x86-64 target (or another architecture).
    Baseline,
    /// AVX2 with fused multiply–adds (x86-64-v3).
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// AVX-512F (which includes AVX2 and FMA).
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

/// The widest [`Isa`] this processor runs, detected once: the one switch
/// behind every run-time dispatch (the vectorised transcendentals of
/// `math::vector` and the kernel column passes of `model::block`).
pub fn isa() -> Isa {
    static ISA: std::sync::OnceLock<Isa> = std::sync::OnceLock::new();
    *ISA.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") {
                return Isa::Avx512;
            }
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
            {
                return Isa::Avx2;
            }
        }
        Isa::Baseline
    })
}
