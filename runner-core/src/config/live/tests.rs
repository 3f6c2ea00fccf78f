use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::config::test_support::*;
use crate::config::*;

/// An index mapping `cat-fn:v1` to `path`, and warming `cat-fn:v{version}`.
fn index(path: &str, version: u32) -> Arc<ImageIndex> {
    let config = config(
        "cat",
        &format!(
            "image: cat-fn\nbinaryExecutor:\n  tags: [v1]\n  path: {path}\npodExecutor:\n  tags: [v{version}]\n"
        ),
    );
    Arc::new(ImageIndex::new(&[config], DEFAULT_IMAGE_PREFIX))
}

fn binary(index: &ImageIndex) -> Option<PathBuf> {
    index.binary_for("cat-fn:v1", "").map(|m| m.path)
}

#[test]
fn the_next_lookup_sees_a_published_index_and_a_running_call_keeps_its_own() {
    let (publisher, live) = LiveIndex::new(index("/a", 1));
    let running = live.current();
    publisher.publish(index("/b", 2));
    assert_eq!(binary(&live.current()), Some(PathBuf::from("/b")));
    assert_eq!(binary(&publisher.current()), Some(PathBuf::from("/b")));
    // The call that started before the swap still has the old index, and
    // is the last to hold it: it is freed when that call ends.
    assert_eq!(binary(&running), Some(PathBuf::from("/a")));
    assert_eq!(Arc::strong_count(&running), 1);
    // Clones read the same index.
    let clone = live.clone();
    publisher.publish(index("/c", 3));
    assert_eq!(binary(&clone.current()), Some(PathBuf::from("/c")));
}

#[test]
fn a_fixed_index_needs_no_publisher() {
    let live = LiveIndex::fixed(index("/a", 1));
    assert_eq!(binary(&live.current()), Some(PathBuf::from("/a")));
    let live: LiveIndex = index("/b", 1).into();
    assert_eq!(binary(&live.current()), Some(PathBuf::from("/b")));
}

/// Readers on other threads, while indexes are swapped under them, always
/// get a whole index, and never one older than an index they already saw.
#[test]
fn readers_see_whole_indexes_in_publication_order_while_they_are_swapped() {
    const VERSIONS: u32 = 300;
    let indexes: Vec<Arc<ImageIndex>> = (1..=VERSIONS).map(|v| index("/a", v)).collect();
    let (publisher, live) = LiveIndex::new(index("/a", 0));
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let live = live.clone();
            let done = done.clone();
            std::thread::spawn(move || {
                let mut last = 0;
                let mut reads = 0u64;
                while !done.load(Ordering::Acquire) || reads == 0 {
                    let current = live.current();
                    assert_eq!(binary(&current), Some(PathBuf::from("/a")));
                    let warm = current.warm_images();
                    let version: u32 = warm[0].rsplit(":v").next().unwrap().parse().unwrap();
                    assert!(version >= last, "saw v{version} after v{last}");
                    last = version;
                    reads += 1;
                }
                last
            })
        })
        .collect();
    for next in indexes {
        publisher.publish(next);
    }
    done.store(true, Ordering::Release);
    for reader in readers {
        let last = reader.join().unwrap();
        assert!(last <= VERSIONS);
    }
    assert_eq!(
        live.current().warm_images(),
        vec![format!("{PREFIX}/cat-fn:v{VERSIONS}")]
    );
}

#[tokio::test]
async fn changed_wakes_a_waiter_and_ends_with_the_publisher() {
    let (publisher, mut live) = LiveIndex::new(index("/a", 1));
    let waiter = tokio::spawn(async move {
        let changed = live.changed().await;
        (changed, binary(&live.current()), live)
    });
    publisher.publish(index("/b", 1));
    let (changed, seen, mut live) = waiter.await.unwrap();
    assert!(changed);
    assert_eq!(seen, Some(PathBuf::from("/b")));
    drop(publisher);
    assert!(!live.changed().await);
    assert_eq!(binary(&live.current()), Some(PathBuf::from("/b")));
}
