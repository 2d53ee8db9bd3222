# The page (`make web`): hbmlab's window compiled by Emscripten for WebAssembly and WebGL 2 into
# build-web/ (index.html, hbmlab.js, hbmlab.wasm; nothing else is fetched when it runs), and the
# same page in one file, hbmlab.html, that opens from disk with no server.
# Included by the top-level CMakeLists.txt when the compiler is Emscripten (the `web` preset).
#
# The libraries sim/ uses are Debian's header-only ones (fmt in header-only mode, nlohmann-json,
# toml++, CLI11), seen through a folder of links so that no other host header reaches emcc. Dear
# ImGui is compiled from Debian's own imgui source package, the version the desktop links
# (viz/web/imgui-source.sh unpacks it into build-web/imgui/).
set(HBMLAB_IMGUI_SOURCE_DIR ${CMAKE_BINARY_DIR}/imgui CACHE PATH "Dear ImGui's sources (viz/web/imgui-source.sh)")
if(NOT EXISTS ${HBMLAB_IMGUI_SOURCE_DIR}/imgui.cpp)
  message(FATAL_ERROR "hbmlab: no Dear ImGui sources in ${HBMLAB_IMGUI_SOURCE_DIR}: run viz/web/imgui-source.sh ${HBMLAB_IMGUI_SOURCE_DIR} (make web does)")
endif()

set(host_headers ${CMAKE_BINARY_DIR}/host-headers)
file(MAKE_DIRECTORY ${host_headers})
foreach(dir fmt nlohmann toml++ CLI stb)
  if(NOT EXISTS /usr/include/${dir})
    message(FATAL_ERROR "hbmlab: /usr/include/${dir} is missing: install the Debian packages of .ci/install-deps")
  endif()
  file(CREATE_LINK /usr/include/${dir} ${host_headers}/${dir} SYMBOLIC)
endforeach()

add_library(fmt::fmt INTERFACE IMPORTED)
target_include_directories(fmt::fmt INTERFACE ${host_headers})
target_compile_definitions(fmt::fmt INTERFACE FMT_HEADER_ONLY=1)
foreach(t nlohmann_json::nlohmann_json tomlplusplus::tomlplusplus CLI11::CLI11)
  add_library(${t} INTERFACE IMPORTED)
  target_include_directories(${t} INTERFACE ${host_headers})
endforeach()
add_library(Threads::Threads INTERFACE IMPORTED)  # the page has one thread (viz/platform.hpp)

# Dear ImGui with its GLFW backend (Emscripten's GLFW 3 on the page's canvas) and OpenGL 3 backend
# (WebGL 2). `imgui` is the name viz/CMakeLists.txt links, as pkg-config's on the desktop.
set(imgui ${HBMLAB_IMGUI_SOURCE_DIR})
add_library(hbmlab_imgui STATIC ${imgui}/imgui.cpp ${imgui}/imgui_draw.cpp ${imgui}/imgui_tables.cpp
            ${imgui}/imgui_widgets.cpp ${imgui}/backends/imgui_impl_glfw.cpp ${imgui}/backends/imgui_impl_opengl3.cpp)
target_include_directories(hbmlab_imgui SYSTEM PUBLIC ${imgui} ${imgui}/backends ${host_headers}/stb)
# -sUSE_GLFW=3 is a link setting (emcc ignores it, with a warning, when compiling).
target_link_options(hbmlab_imgui PUBLIC -sUSE_GLFW=3 -sMIN_WEBGL_VERSION=2 -sMAX_WEBGL_VERSION=2)
add_library(PkgConfig::IMGUI ALIAS hbmlab_imgui)
add_library(glfw INTERFACE IMPORTED)
add_library(OpenGL::GL INTERFACE IMPORTED)
set(HBMLAB_IMGUI_BACKENDS_DIR ${imgui}/backends)
set(HBMLAB_HAVE_GUI ON)

# The page itself, after viz/ is added (hbmlab_page_target below).
function(hbmlab_page_target)
  add_executable(hbmlab_page ${PROJECT_SOURCE_DIR}/viz/web/main.cpp)
  set_target_properties(hbmlab_page PROPERTIES OUTPUT_NAME hbmlab SUFFIX .js)
  target_link_libraries(hbmlab_page PRIVATE hbmlab_viz)
  # Embedded: the measurements the Measured tab and the explorer read, and the fonts the desktop
  # loads from fonts-dejavu-core, at the paths viz/ opens them (an in-memory file system).
  file(GLOB measurements ${PROJECT_SOURCE_DIR}/assets/measurements/*.json)
  set(embed "")
  foreach(f IN LISTS measurements)
    get_filename_component(name ${f} NAME)
    list(APPEND embed "SHELL:--embed-file ${f}@/assets/measurements/${name}")
  endforeach()
  foreach(font DejaVuSans.ttf DejaVuSans-Bold.ttf)
    set(f /usr/share/fonts/truetype/dejavu/${font})
    if(EXISTS ${f})
      list(APPEND embed "SHELL:--embed-file ${f}@${f}")
    endif()
  endforeach()
  target_link_options(hbmlab_page PRIVATE ${embed} -sALLOW_MEMORY_GROWTH=1
                      -sEXPORTED_RUNTIME_METHODS=[] -sENVIRONMENT=web)
  set_property(TARGET hbmlab_page APPEND PROPERTY LINK_DEPENDS ${measurements})
  configure_file(${PROJECT_SOURCE_DIR}/viz/web/index.html ${CMAKE_BINARY_DIR}/index.html COPYONLY)

  # The same page in one file, hbmlab.html, that opens from disk: no second link, the linked
  # hbmlab.js and hbmlab.wasm written into index.html (viz/web/single_file.py).
  find_package(Python3 COMPONENTS Interpreter REQUIRED)
  set(single_file ${PROJECT_SOURCE_DIR}/viz/web/single_file.py)
  add_custom_command(OUTPUT ${CMAKE_BINARY_DIR}/hbmlab.html
                     COMMAND ${Python3_EXECUTABLE} ${single_file} ${CMAKE_BINARY_DIR}/index.html
                             $<TARGET_FILE:hbmlab_page> ${CMAKE_BINARY_DIR}/hbmlab.wasm ${CMAKE_BINARY_DIR}/hbmlab.html
                     DEPENDS hbmlab_page $<TARGET_FILE:hbmlab_page> ${CMAKE_BINARY_DIR}/index.html ${single_file}
                     COMMENT "hbmlab.html: the page in one file")
  add_custom_target(hbmlab_page_single_file ALL DEPENDS ${CMAKE_BINARY_DIR}/hbmlab.html)
endfunction()
