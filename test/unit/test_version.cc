/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The version query agrees with the header the program was built with.
 */
#include <ucp/api/ucp_ifunc.h>

#include <gtest/gtest.h>

#include <string>

TEST(Version, QueryMatchesTheHeader)
{
    unsigned major = 99, minor = 99, release = 99;
    ucp_ifunc_get_version(&major, &minor, &release);
    EXPECT_EQ(unsigned(UCP_IFUNC_API_MAJOR), major);
    EXPECT_EQ(unsigned(UCP_IFUNC_API_MINOR), minor);
    EXPECT_EQ(std::to_string(major) + "." + std::to_string(minor) + "." +
                      std::to_string(release),
              ucp_ifunc_get_version_string());
    EXPECT_GE(UCP_IFUNC_API_VERSION, UCP_IFUNC_VERSION(0, 2));
    EXPECT_LT(UCP_IFUNC_API_VERSION, UCP_IFUNC_VERSION(1, 0));
}
