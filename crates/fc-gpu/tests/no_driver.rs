//! The `cuda` feature on a machine without a CUDA driver: opening a GPU is an error
//! (`NoDriver`), never a panic. (On a GPU machine this test is skipped by its own check.)
#![cfg(feature = "cuda")]

use fc_gpu::cuda::{Gpu, GpuError};

#[test]
fn a_machine_without_a_driver_gets_an_error() {
    let has_driver = std::path::Path::new("/proc/driver/nvidia/version").exists();
    if has_driver {
        eprintln!("an NVIDIA driver is present: this test is for machines without one");
        return;
    }
    assert!(matches!(
        Gpu::open(0, 2),
        Err(GpuError::NoDriver | GpuError::Driver(_))
    ));
    assert!(Gpu::device_count().is_err());
}
