// SPDX-License-Identifier: LGPL-3.0-or-later
//! Ceph OSD data types with their exact byte images (src/osd/osd_types.h, 16.2).
//! Each type lives in its own module; corpus tests in tests/corpus.rs.
