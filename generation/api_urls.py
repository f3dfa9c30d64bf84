from rest_framework.routers import DefaultRouter

from generation.api import GenerationJobViewSet

router = DefaultRouter()
router.register("generation-jobs", GenerationJobViewSet, basename="generation-job")
urlpatterns = router.urls
