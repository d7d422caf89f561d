//! Comparing a GPU result with the CPU reference under per-element error bounds.

/// The first element out of bounds.
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    /// The element's index.
    pub index: usize,
    /// What the GPU computed.
    pub got: f64,
    /// What the CPU reference computed.
    pub want: f64,
    /// The element's bound on `|got − want|`.
    pub tolerance: f64,
}

/// The outcome of a comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// Elements compared.
    pub checked: usize,
    /// The largest `|got − want|` seen.
    pub max_abs_error: f64,
    /// `None` when every element is within its bound.
    pub mismatch: Option<Mismatch>,
}

impl Verdict {
    /// Whether every element is within its bound.
    pub fn passed(&self) -> bool {
        self.mismatch.is_none()
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.mismatch {
            None => write!(f, "correct ({} values, max abs error {:.3e})", self.checked, self.max_abs_error),
            Some(m) => write!(
                f,
                "WRONG at element {}: got {}, expected {} (tolerance {:.3e})",
                m.index, m.got, m.want, m.tolerance
            ),
        }
    }
}

/// Checks `got` against `want` element by element; a length difference is a mismatch too.
/// NaN never passes.
pub fn verify(got: &[f32], want: &[f64], tolerance: &[f64]) -> Verdict {
    let mut max_abs_error: f64 = 0.0;
    let mut mismatch = None;
    for (index, ((&g, &w), &tol)) in got.iter().zip(want).zip(tolerance).enumerate() {
        let error = (f64::from(g) - w).abs();
        if error.is_finite() {
            max_abs_error = max_abs_error.max(error);
        }
        // Written so that a NaN error (NaN result) fails too.
        let within = error <= tol;
        if mismatch.is_none() && !within {
            mismatch = Some(Mismatch { index, got: f64::from(g), want: w, tolerance: tol });
        }
    }
    if mismatch.is_none() && got.len() != want.len() {
        let index = got.len().min(want.len());
        mismatch = Some(Mismatch {
            index,
            got: f64::NAN,
            want: want.get(index).copied().unwrap_or(f64::NAN),
            tolerance: 0.0,
        });
    }
    Verdict { checked: got.len().min(want.len()), max_abs_error, mismatch }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verify_finds_the_first_bad_element_and_rejects_nan() {
        assert!(verify(&[1.0, 2.0], &[1.0, 2.0], &[0.0, 0.0]).passed());
        let bad = verify(&[1.0, 2.5, f32::NAN], &[1.0, 2.0, 3.0], &[0.1, 0.1, 0.1]);
        assert_eq!(bad.mismatch.map(|m| m.index), Some(1));
        assert!(!verify(&[f32::NAN], &[1.0], &[1.0]).passed());
        assert!(!verify(&[1.0], &[1.0, 2.0], &[1.0, 1.0]).passed());
    }
}
