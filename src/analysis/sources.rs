//! Who asked for memory: a calling library's path mapped to the source names
//! the report uses. PyTorch's caching allocator lives in libc10_cuda, so its
//! requests are "in pool"; everything else is out of pool.

use std::sync::Arc;

/// The source name of PyTorch's caching-allocator pool.
pub const TORCH_POOL: &str = "torch pool";
/// Requests whose caller could not be found on the stack.
pub const UNKNOWN: &str = "unknown caller";
/// libtorch's own requests beside its pool (cudaMalloc outside the caching
/// allocator): named apart from the pool where memory is the subject.
pub const TORCH_OUTSIDE_POOL: &str = "torch (outside pool)";

/// The library a source name is, for lines about code rather than memory
/// (module loads): libtorch's modules are torch's, not "outside pool".
pub fn library_of(source: &str) -> &str {
    if source == TORCH_OUTSIDE_POOL {
        "torch"
    } else {
        source
    }
}

/// A source name shared cheaply across millions of events.
pub type SourceName = Arc<str>;

/// Maps a library path to (source name, is PyTorch's pool).
pub fn classify(path: &str) -> (String, bool) {
    let base = path.rsplit('/').next().unwrap_or(path);
    let lower = path.to_ascii_lowercase();
    let named = |n: &str| (n.to_string(), false);
    if base.starts_with("libc10_cuda") {
        return (TORCH_POOL.to_string(), true);
    }
    if base.starts_with("libnccl") {
        return named("nccl");
    }
    if base.starts_with("libcublas") {
        return named("cublas");
    }
    if base.starts_with("libcudnn") {
        return named("cudnn");
    }
    if lower.contains("/triton/") || base.contains("triton") || base.starts_with("cuda_utils") {
        return named("triton");
    }
    if base.starts_with("libtorch") || base.starts_with("libc10") {
        return named(TORCH_OUTSIDE_POOL);
    }
    for lib in [
        "libcufft",
        "libcusparse",
        "libcusolver",
        "libcurand",
        "libnvrtc",
        "libnvJitLink",
        "libnvshmem",
        "libcufile",
    ] {
        if base.starts_with(lib) {
            return named(&lib[3..]);
        }
    }
    if base.starts_with("python") || base.starts_with("libpython") {
        return named("python (ctypes/extension)");
    }
    if base.is_empty() {
        return named(UNKNOWN);
    }
    let short = base.split(".so").next().unwrap_or(base);
    named(short.strip_prefix("lib").unwrap_or(short))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_libraries() {
        assert_eq!(
            classify("/venv/lib/python3.12/site-packages/torch/lib/libc10_cuda.so"),
            (TORCH_POOL.into(), true)
        );
        assert_eq!(classify("/x/nvidia/nccl/lib/libnccl.so.2").0, "nccl");
        assert_eq!(classify("/x/nvidia/cu13/lib/libcublasLt.so.13").0, "cublas");
        assert_eq!(
            classify("/root/.triton/cache/AB/cuda_utils.cpython-312-x86_64-linux-gnu.so").0,
            "triton"
        );
        assert_eq!(
            classify("/tmp/x/triton/CD/__triton_launcher.so").0,
            "triton"
        );
        assert_eq!(
            classify("/x/torch/lib/libtorch_cuda.so").0,
            "torch (outside pool)"
        );
        assert_eq!(library_of(TORCH_OUTSIDE_POOL), "torch");
        assert_eq!(library_of("nccl"), "nccl");
        assert_eq!(classify("/usr/lib/libcufft.so.11").0, "cufft");
        assert_eq!(classify("/opt/app/libmyalloc.so.1").0, "myalloc");
        assert_eq!(
            classify("/usr/bin/python3.12").0,
            "python (ctypes/extension)"
        );
    }
}
