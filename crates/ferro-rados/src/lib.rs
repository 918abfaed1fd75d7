// SPDX-License-Identifier: MPL-2.0
//! FerroCeph's RADOS client library.

pub mod mapping;

pub use mapping::ObjectMapping;
