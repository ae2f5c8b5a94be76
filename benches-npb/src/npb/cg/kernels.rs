//! CG's local vector kernels: the work a process does between two
//! communication steps, on its own slices only.
//!
//! Each reduction adds left to right from 0.0, as NPB's loops do, so a sum
//! is bit-identical to the reference for the same inputs. Where NPB runs two
//! loops back to back over the same data ([`update_z_r`]), the kernel fuses
//! them; the order of every floating-point operation is unchanged.

/// `Σ a[j]·b[j]`, left to right.
#[inline]
pub fn dot(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).fold(0.0, |s, (x, y)| s + x * y)
}

/// `[Σ x[j]·z[j], Σ z[j]·z[j]]` in one pass (the norms of an outer
/// iteration).
#[inline]
pub fn dot2(x: &[f64], z: &[f64]) -> [f64; 2] {
    assert_eq!(x.len(), z.len());
    x.iter()
        .zip(z)
        .fold([0.0, 0.0], |[xz, zz], (x, z)| [xz + x * z, zz + z * z])
}

/// `z += alpha·p; r −= alpha·q`, returning the new `r·r`.
#[inline]
pub fn update_z_r(alpha: f64, p: &[f64], q: &[f64], z: &mut [f64], r: &mut [f64]) -> f64 {
    let n = p.len();
    assert!(q.len() == n && z.len() == n && r.len() == n);
    let mut rho = 0.0;
    for (((z, r), p), q) in z.iter_mut().zip(r.iter_mut()).zip(p).zip(q) {
        *z += alpha * p;
        *r -= alpha * q;
        rho += *r * *r;
    }
    rho
}

/// `p = r + beta·p`.
#[inline]
pub fn update_p(beta: f64, r: &[f64], p: &mut [f64]) {
    assert_eq!(r.len(), p.len());
    for (p, r) in p.iter_mut().zip(r) {
        *p = r + beta * *p;
    }
}

/// `w += theirs` (accumulating a partner's partial mat-vec result).
#[inline]
pub fn add_assign(w: &mut [f64], theirs: &[f64]) {
    assert_eq!(w.len(), theirs.len());
    for (w, t) in w.iter_mut().zip(theirs) {
        *w += t;
    }
}

/// `Σ (x[j] − r[j])²` (the squared residual once `r` holds `A·z`).
#[inline]
pub fn residual_sq(x: &[f64], r: &[f64]) -> f64 {
    assert_eq!(x.len(), r.len());
    x.iter().zip(r).fold(0.0, |s, (x, r)| {
        let d = x - r;
        s + d * d
    })
}

/// `x = s·z`.
#[inline]
pub fn scale_into(x: &mut [f64], s: f64, z: &[f64]) {
    assert_eq!(x.len(), z.len());
    for (x, z) in x.iter_mut().zip(z) {
        *x = s * z;
    }
}
