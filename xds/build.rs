//! Compiles our Envoy proto subset with protox (no system protoc) into prost
//! structs, and writes the descriptor set used for JSON/YAML decoding.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("proto");
    let mut files = Vec::new();
    collect(&root, &mut files)?;
    files.sort();
    println!("cargo:rerun-if-changed=proto");
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
    }

    let fds = protox::compile(&files, [&root])?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(
        out.join("descriptor.bin"),
        prost::Message::encode_to_vec(&fds),
    )?;

    prost_build::Config::new()
        .include_file("_includes.rs")
        // `prost::Name` lets decoding find each struct's descriptor and type URL.
        .enable_type_names()
        // `Name::type_url()` then gives what goes into an `Any`.
        .type_name_domain(["."], "type.googleapis.com")
        .compile_fds(fds)?;
    Ok(())
}

fn collect(dir: &std::path::Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "proto") {
            out.push(path);
        }
    }
    Ok(())
}
