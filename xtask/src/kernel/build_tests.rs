use super::*;

#[test]
fn a_truncated_kernel_image_is_refused_with_the_command_that_rebuilds_it() {
    let t = util::testdir::Dir::new("bzimage");
    fs::write(t.path().join("bzImage"), b"a whole kernel image").unwrap();
    let mut built = Built {
        dir: t.path().to_path_buf(),
        meta: VariantMeta::default(),
    };
    built.meta.bzimage_sha256 = util::sha256_file(&built.bzimage()).unwrap();
    let rebuild = "cargo xtask build-kernel --variant v1";
    check_image(&built, rebuild).unwrap();
    fs::write(built.bzimage(), b"a whole kernel").unwrap();
    let e = check_image(&built, rebuild).unwrap_err().to_string();
    assert!(
        e.contains("bzImage is truncated or damaged")
            && e.contains("rebuild it with `cargo xtask build-kernel --variant v1`"),
        "{e}"
    );
}
