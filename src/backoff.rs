//! Pure integer backoff: `initial × multiplier^n`, saturating, with equal
//! jitter drawn from host-supplied entropy. No clock, no float, no randomness
//! of its own, so every host computes the same nanosecond.

/// splitmix64: one step of the generator the seed's backoff used, as a mixer.
pub fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The random word for draw `n` from the host's `entropy`.
pub fn draw(entropy: u64, n: u64) -> u64 {
    splitmix64(entropy ^ splitmix64(n))
}

/// `initial × multiplier^n`, saturating at `u64::MAX`.
pub fn base_delay(initial: u64, multiplier: u32, n: u32) -> u64 {
    let factor = (multiplier as u64).checked_pow(n).unwrap_or(u64::MAX);
    initial.saturating_mul(factor)
}

/// Equal jitter: a delay in `[base/2, base]` inclusive.
pub fn equal_jitter(base: u64, random: u64) -> u64 {
    let half = base / 2;
    let span = base - half;
    match span.checked_add(1) {
        Some(m) => half + random % m,
        None => half + random % span,
    }
}

/// The capped, jittered delay before retry `n` (0-based).
pub fn delay(initial: u64, multiplier: u32, n: u32, cap: u64, entropy: u64) -> u64 {
    let base = base_delay(initial, multiplier, n).min(cap);
    equal_jitter(base, draw(entropy, n as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_doubles_and_saturates() {
        let ms = 1_000_000;
        let v: Vec<u64> = (0..4).map(|n| base_delay(100 * ms, 2, n)).collect();
        assert_eq!(v, vec![100 * ms, 200 * ms, 400 * ms, 800 * ms]);
        assert_eq!(base_delay(u64::MAX / 2, 2, 5), u64::MAX);
        assert_eq!(base_delay(10, 10, 40), u64::MAX);
    }

    #[test]
    fn jitter_stays_in_half_to_full() {
        for r in [0u64, 1, 7, u64::MAX, 123_456_789] {
            let d = equal_jitter(1_000, r);
            assert!((500..=1_000).contains(&d), "{d}");
        }
        assert_eq!(equal_jitter(1_000, 0), 500);
        assert_eq!(equal_jitter(1_000, 500), 1_000);
        assert!(equal_jitter(u64::MAX, u64::MAX) >= u64::MAX / 2);
        assert_eq!(equal_jitter(0, 99), 0);
    }

    #[test]
    fn draws_differ_by_attempt_and_entropy() {
        assert_ne!(draw(1, 0), draw(1, 1));
        assert_ne!(draw(1, 0), draw(2, 0));
        assert_eq!(draw(42, 3), draw(42, 3));
    }
}
