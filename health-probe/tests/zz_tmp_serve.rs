mod common;
use common::*;
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
#[ignore]
async fn serve_for_a_while() {
    let addr = health_server().await;
    std::fs::write("/tmp/hp-addr.txt", &addr).unwrap();
    tokio::time::sleep(std::time::Duration::from_secs(400)).await;
}
