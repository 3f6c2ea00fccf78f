mod common;
use common::*;
use tonic::transport::{Identity, Server, ServerTlsConfig};
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
#[ignore]
async fn serve_tls_for_a_while() {
    let c = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let tls = ServerTlsConfig::new().identity(Identity::from_pem(
        c.cert.pem(),
        c.signing_key.serialize_pem(),
    ));
    let addr = serve(
        Server::builder()
            .tls_config(tls)
            .unwrap()
            .add_service(standard_health().await),
    )
    .await;
    std::fs::write("/tmp/hp-tls-addr.txt", &addr).unwrap();
    std::fs::write("/tmp/hp-tls-ca.pem", c.cert.pem()).unwrap();
    tokio::time::sleep(std::time::Duration::from_secs(300)).await;
}
