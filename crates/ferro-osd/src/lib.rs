// SPDX-License-Identifier: LGPL-3.0-or-later
//! ferro-osd: a Ceph OSD daemon built on ferrostore and the sans-IO `pg` engine.
