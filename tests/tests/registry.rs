//! Function entrypoints read from a real registry: Debian's
//! `docker-registry` on loopback, started here, with images built here
//! (`FROM scratch`) and pushed by the Docker engine.

#![allow(clippy::unwrap_used)]

use e2e_tests::{build_image, docker, prerequisite, require_registry, start_registry};
use function_runner::backend::kube::entrypoint::{EntrypointError, Entrypoints};

#[tokio::test]
async fn entrypoints_come_from_the_image_config_in_the_registry() {
    let Some(()) = prerequisite(require_registry()) else {
        return;
    };
    let (mut registry, addr) = start_registry().unwrap();
    let id = std::process::id();
    let with_both = format!("{addr}/fns/example-fn:{id}");
    registry.images = vec![with_both.clone()];

    build_image(
        &with_both,
        "FROM scratch\nCOPY example-fn /example-fn\nENTRYPOINT [\"/example-fn\"]\nCMD [\"--verbose\"]\n",
        &["example-fn"],
    )
    .unwrap();
    docker(&["push", "-q", &with_both]).unwrap();

    let entrypoints = Entrypoints::new(vec![addr.clone()]);
    assert_eq!(
        entrypoints.of(&with_both).await.unwrap(),
        ["/example-fn", "--verbose"]
    );
    // Again, from the cache: the registry is gone.
    let _ = registry.child.kill();
    let _ = registry.child.wait();
    assert_eq!(
        entrypoints.of(&with_both).await.unwrap(),
        ["/example-fn", "--verbose"]
    );
    let fresh = Entrypoints::new(vec![addr.clone()]);
    let err = fresh.of(&with_both).await.unwrap_err();
    assert!(matches!(err, EntrypointError::Registry { .. }), "{err}");
    assert!(err.to_string().contains(&with_both), "{err}");
}

#[tokio::test]
async fn an_image_with_nothing_to_run_is_refused_by_name() {
    let Some(()) = prerequisite(require_registry()) else {
        return;
    };
    let (mut registry, addr) = start_registry().unwrap();
    let image = format!("{addr}/fns/nothing:{}", std::process::id());
    registry.images = vec![image.clone()];
    build_image(
        &image,
        "FROM scratch\nCOPY example-fn /example-fn\n",
        &["example-fn"],
    )
    .unwrap();
    docker(&["push", "-q", &image]).unwrap();
    let err = Entrypoints::new(vec![addr]).of(&image).await.unwrap_err();
    assert!(matches!(err, EntrypointError::Empty { .. }), "{err}");
}
