//! The smallest package that still fails: whole files first, then lines
//! of each file by delta debugging (chunks of lines removed while the
//! failure stays, the chunks halved when none can go).

use super::gen::Package;

/// Shrinks `pkg` while `fails` holds, trying at most `budget` candidates.
pub fn shrink(pkg: &Package, budget: usize, fails: &mut dyn FnMut(&Package) -> bool) -> Package {
    let mut best = pkg.clone();
    let mut tries = 0;
    let mut attempt = |p: &Package, tries: &mut usize| {
        *tries += 1;
        fails(p)
    };
    // Files.
    let mut i = 0;
    while best.files.len() > 1 && i < best.files.len() && tries < budget {
        let mut p = best.clone();
        p.files.remove(i);
        if attempt(&p, &mut tries) {
            best = p;
        } else {
            i += 1;
        }
    }
    // Lines, file by file.
    for f in 0..best.files.len() {
        let mut lines: Vec<Vec<u8>> = split_lines(&best.files[f].1);
        let mut chunks = 2usize;
        while lines.len() > 1 && tries < budget {
            let size = lines.len().div_ceil(chunks);
            let mut removed = false;
            let mut start = 0;
            while start < lines.len() && tries < budget {
                let end = (start + size).min(lines.len());
                let mut candidate = lines.clone();
                candidate.drain(start..end);
                let mut p = best.clone();
                p.files[f].1 = candidate.concat();
                if attempt(&p, &mut tries) {
                    best = p;
                    lines = candidate;
                    removed = true;
                } else {
                    start = end;
                }
            }
            if !removed {
                if size == 1 {
                    break;
                }
                chunks = (chunks * 2).min(lines.len());
            } else {
                chunks = chunks.max(2).min(lines.len().max(1));
            }
        }
    }
    best
}

fn split_lines(bytes: &[u8]) -> Vec<Vec<u8>> {
    bytes
        .split_inclusive(|b| *b == b'\n')
        .map(<[u8]>::to_vec)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_just_what_makes_it_fail() {
        let pkg = Package {
            files: vec![
                ("a.yaml".into(), b"x: 1\ny: 2\nbad: 3\nz: 4\n".to_vec()),
                ("b.yaml".into(), b"q: 1\n".to_vec()),
            ],
        };
        let mut fails = |p: &Package| {
            p.files
                .iter()
                .any(|(_, b)| b.windows(3).any(|w| w == b"bad"))
        };
        let small = shrink(&pkg, 100, &mut fails);
        assert_eq!(
            small.files,
            vec![("a.yaml".to_owned(), b"bad: 3\n".to_vec())]
        );
    }
}
