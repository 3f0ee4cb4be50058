/*
 * tn_embed_channel.h - one channel of the embedding's backward for one edge (the transpose of the
 * embedding's per-edge term), shared by the CPU pass (cpu/tensornet_cpu_impl.h) and the CUDA
 * kernel (cuda/tn_ops.cu): included once per precision with REAL (float | double), TN_EC (the
 * function's name) and TN_EC_HD (__host__ __device__ under CUDA, nothing in C) defined.  No include
 * guard on purpose.
 *
 * Channel f of an edge: G = dE/dX of its center (9 F values, entry-major), u its unit vector (uu
 * = u.u), zij = p1[f] + p2[f] (the species' tables), cz = fc zij and k[3] the channel's three
 * distance projections.  Adds dE/du to gu[3] and dE/dfc to *gfc; writes the dE/d projection terms
 * to gd[3].
 */
static inline TN_EC_HD void TN_EC(int F, int f, const REAL *G, const REAL *u, REAL uu, REAL zij,
                                  REAL cz, const REAL *k, REAL *gu, REAL *gfc, REAL *gd) {
    REAL g00 = G[0 * F + f], g01 = G[1 * F + f], g02 = G[2 * F + f];
    REAL g10 = G[3 * F + f], g11 = G[4 * F + f], g12 = G[5 * F + f];
    REAL g20 = G[6 * F + f], g21 = G[7 * F + f], g22 = G[8 * F + f];
    REAL tr = g00 + g11 + g22;
    REAL s0 = g21 - g12, s1 = g02 - g20, s2 = g10 - g01;
    REAL ug0 = (g00 + g00) * u[0] + (g01 + g10) * u[1] + (g02 + g20) * u[2];
    REAL ug1 = (g10 + g01) * u[0] + (g11 + g11) * u[1] + (g12 + g21) * u[2];
    REAL ug2 = (g20 + g02) * u[0] + (g21 + g12) * u[1] + (g22 + g22) * u[2];
    REAL gf1 = tr;
    REAL gf2 = s0 * u[0] + s1 * u[1] + s2 * u[2];
    REAL gf3 = (REAL)0.5 * (ug0 * u[0] + ug1 * u[1] + ug2 * u[2]) - uu * tr / (REAL)3;
    REAL f2 = cz * k[1], f3 = cz * k[2];
    gu[0] += f2 * s0 + f3 * (ug0 - (REAL)2 * tr * u[0] / (REAL)3);
    gu[1] += f2 * s1 + f3 * (ug1 - (REAL)2 * tr * u[1] / (REAL)3);
    gu[2] += f2 * s2 + f3 * (ug2 - (REAL)2 * tr * u[2] / (REAL)3);
    *gfc += zij * (gf1 * k[0] + gf2 * k[1] + gf3 * k[2]);
    gd[0] = gf1 * cz;
    gd[1] = gf2 * cz;
    gd[2] = gf3 * cz;
}
